"""deploy/prometheus and deploy/grafana, checked with Prometheus' own tools
and against a live phasor-server:

- prometheus.yml (the one-machine config) passes `promtool check config` in
  Debian 12's Prometheus; prometheus-kubernetes.yml is valid apart from the
  Kubernetes discovery Debian's build leaves out;
- rules.yml passes `promtool check rules` and its unit tests
  (`promtool test rules rules_test.yml`);
- every PromQL expression of the Grafana dashboard parses (`promtool check
  rules` on a rule file made of them) and names only metrics a running
  phasor-server exports;
- a real Prometheus, started with prometheus.yml pointed at a test server,
  scrapes it, loads the rules and answers every dashboard query with data.

promtool and prometheus come from Debian's prometheus package
(deploy/install-deps.sh --test); without them the test fails."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import yaml

import harness

PROMETHEUS_DIR = os.path.join(harness.SOURCE_DIR, "deploy", "prometheus")
DASHBOARD = os.path.join(harness.SOURCE_DIR, "deploy", "grafana", "phasor.json")
# Grafana's variables, replaced as Grafana would before a query is sent.
GRAFANA_VARIABLES = {"$__rate_interval": "30s", "${datasource}": "",
                     "$job": "phasor", "$instance": ".*"}


def tool(name):
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} not installed: run "
                             "deploy/install-deps.sh --test (Debian package "
                             "prometheus)")
    return path


def run(*args, cwd=None):
    return subprocess.run(list(args), capture_output=True, text=True,
                          timeout=120, cwd=cwd, stdin=subprocess.DEVNULL,
                          check=False)


def dashboard_panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # Collapsed rows nest theirs.


def dashboard_expressions():
    """[(panel title, PromQL with Grafana's variables replaced)]."""
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    found = []
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            found.append((panel["title"], expr))
    return found


def metric_names(expr):
    """Metric names of a PromQL expression: the identifiers right before a
    label matcher (every selector in Phasor's files has one)."""
    without_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", without_strings))


def rule_expressions():
    with open(os.path.join(PROMETHEUS_DIR, "rules.yml")) as f:
        rules = yaml.safe_load(f)
    return [(rule["alert"], rule["expr"]) for group in rules["groups"]
            for rule in group["rules"]]


class PromtoolTest(unittest.TestCase):

    def test_local_config_loads_in_debian_prometheus(self):
        result = run(tool("promtool"), "check", "config",
                     os.path.join(PROMETHEUS_DIR, "prometheus.yml"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS: 1 rule files found", result.stdout)
        with open(os.path.join(PROMETHEUS_DIR, "prometheus.yml")) as f:
            config = yaml.safe_load(f)
        [job] = config["scrape_configs"]
        self.assertEqual(job["job_name"], "phasor")
        self.assertEqual(job["static_configs"][0]["targets"], ["127.0.0.1:9464"])

    def test_kubernetes_config_is_valid_but_for_pod_discovery(self):
        path = os.path.join(PROMETHEUS_DIR, "prometheus-kubernetes.yml")
        with open(path) as f:
            config = yaml.safe_load(f)
        [job] = config["scrape_configs"]
        self.assertEqual(job["job_name"], "phasor")  # Same job as the rules.
        self.assertEqual(job["kubernetes_sd_configs"], [{"role": "pod"}])
        kept = {tuple(r["source_labels"]): r["regex"]
                for r in job["relabel_configs"] if r.get("action") == "keep"}
        self.assertEqual(kept[("__meta_kubernetes_pod_container_port_name",)],
                         "metrics")
        # Debian's promtool knows no kubernetes_sd_configs; everything else
        # in the file must pass it, so check a copy that discovers nothing.
        result = run(tool("promtool"), "check", "config", path)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("field kubernetes_sd_configs not found", result.stdout + result.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            del job["kubernetes_sd_configs"]
            job["static_configs"] = [{"targets": []}]
            with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                yaml.safe_dump(config, f)
            shutil.copy(os.path.join(PROMETHEUS_DIR, "rules.yml"), tmp)
            result = run(tool("promtool"), "check", "config",
                         os.path.join(tmp, "prometheus.yml"))
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_rules_check_and_unit_tests(self):
        result = run(tool("promtool"), "check", "rules",
                     os.path.join(PROMETHEUS_DIR, "rules.yml"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS: 5 rules found", result.stdout)
        alerts = {name for name, _ in rule_expressions()}
        self.assertEqual(alerts, {
            "PhasorInstanceDown", "PhasorHighErrorRatio", "PhasorHighLatencyP99",
            "PhasorInFlightSaturation", "PhasorResourceExhausted"})
        result = run(tool("promtool"), "test", "rules", "rules_test.yml",
                     cwd=PROMETHEUS_DIR)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS", result.stdout)
        # Every alert has a unit test that expects it to fire.
        with open(os.path.join(PROMETHEUS_DIR, "rules_test.yml")) as f:
            tests = yaml.safe_load(f)
        fired = {case["alertname"] for test in tests["tests"]
                 for case in test["alert_rule_test"] if case["exp_alerts"]}
        self.assertEqual(fired, alerts)

    def test_dashboard_expressions_parse(self):
        expressions = dashboard_expressions()
        self.assertGreaterEqual(len(expressions), 15)
        titles = " | ".join(title for title, _ in expressions)
        for needed in ("Calls per second", "Error ratio", "latency",
                       "Encoded values", "in flight", "Bytes", "CPU", "Memory"):
            self.assertIn(needed, titles)
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:expr_{i}", "expr": expr}
            for i, (_, expr) in enumerate(expressions)]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump(rules, f)
            f.flush()
            result = run(tool("promtool"), "check", "rules", f.name)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"SUCCESS: {len(expressions)} rules found", result.stdout)

    def test_grafana_provisioning(self):
        grafana = os.path.join(harness.SOURCE_DIR, "deploy", "grafana", "provisioning")
        with open(os.path.join(grafana, "datasources", "phasor-prometheus.yml")) as f:
            [source] = yaml.safe_load(f)["datasources"]
        self.assertEqual(source["type"], "prometheus")
        # The Prometheus of docs/DEPLOY.md's one-machine setup.
        self.assertEqual(source["url"], "http://127.0.0.1:9090")
        with open(os.path.join(grafana, "dashboards", "phasor.yml")) as f:
            [provider] = yaml.safe_load(f)["providers"]
        self.assertEqual(provider["type"], "file")
        with open(os.path.join(harness.SOURCE_DIR, "docs", "DEPLOY.md")) as f:
            self.assertIn(f"deploy/grafana:{provider['options']['path']}:ro", f.read())
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        for panel in dashboard_panels(dashboard):
            if panel["type"] != "row":
                self.assertEqual(panel["datasource"]["uid"], "${datasource}")

    def test_a_broken_expression_is_caught(self):
        # The check above can fail: promtool refuses a bad expression.
        rules = {"groups": [{"name": "bad", "rules": [
            {"record": "bad:expr", "expr": "sum by (le (rate(x[5m]))"}]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump(rules, f)
            f.flush()
            result = run(tool("promtool"), "check", "rules", f.name)
        self.assertNotEqual(result.returncode, 0)


class LiveTest(unittest.TestCase):
    """One phasor-server and one Prometheus scraping it every second."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = harness.Server().start()
        cls.prometheus = None
        try:
            cls.start_prometheus()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_prometheus(cls):
        # The shipped one-machine config, pointed at the test server's port
        # and sped up; rules.yml beside it as in deploy/prometheus.
        with open(os.path.join(PROMETHEUS_DIR, "prometheus.yml")) as f:
            config = yaml.safe_load(f)
        config["global"].update(scrape_interval="1s", scrape_timeout="1s",
                                evaluation_interval="1s")
        config["scrape_configs"][0]["static_configs"][0]["targets"] = [
            f"{harness.LOOPBACK}:{cls.server.metrics_port}"]
        config_path = os.path.join(cls.tmp.name, "prometheus.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        shutil.copy(os.path.join(PROMETHEUS_DIR, "rules.yml"), cls.tmp.name)
        cls.prometheus_port = harness.free_port()
        cls.prometheus_log = open(os.path.join(cls.tmp.name, "prometheus.log"), "w+")
        cls.prometheus = subprocess.Popen(
            [tool("prometheus"), f"--config.file={config_path}",
             f"--storage.tsdb.path={os.path.join(cls.tmp.name, 'data')}",
             f"--web.listen-address={harness.LOOPBACK}:{cls.prometheus_port}"],
            stdout=cls.prometheus_log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=cls.tmp.name)
        deadline = time.monotonic() + 60
        while True:
            if cls.prometheus.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{cls.log()}")
            try:
                with urllib.request.urlopen(
                        f"http://{harness.LOOPBACK}:{cls.prometheus_port}/-/ready",
                        timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready:\n{cls.log()}")
            time.sleep(0.2)
        # Traffic for every panel: successful and failing calls of several
        # methods, over a few scrapes.
        with cls.server.client(deadline_seconds=20) as client:
            for _ in range(8):
                client.encode_positions(count=64, dim=16)
                client.alibi(num_heads=4)
                try:
                    client.encode_positions(count=4, dim=7)
                except Exception:  # INVALID_ARGUMENT, on purpose.
                    pass
                time.sleep(0.5)

    @classmethod
    def log(cls):
        cls.prometheus_log.flush()
        cls.prometheus_log.seek(0)
        return cls.prometheus_log.read()[-5000:]

    @classmethod
    def tearDownClass(cls):
        if cls.prometheus is not None and cls.prometheus.poll() is None:
            cls.prometheus.send_signal(signal.SIGTERM)
            try:
                cls.prometheus.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.prometheus.kill()
                cls.prometheus.wait(timeout=30)
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def api(self, path, **params):
        url = (f"http://{harness.LOOPBACK}:{self.prometheus_port}/api/v1/{path}"
               f"?{urllib.parse.urlencode(params)}")
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
        self.assertEqual(body["status"], "success", body)
        return body["data"]

    def query_until_data(self, expr, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            data = self.api("query", query=expr)
            if data["result"] or time.monotonic() > deadline:
                return data["result"]
            time.sleep(0.5)

    def test_scraped_and_rules_loaded(self):
        [up] = self.query_until_data('up{job="phasor"} == 1')
        self.assertEqual(up["metric"]["instance"],
                         f"{harness.LOOPBACK}:{self.server.metrics_port}")
        deadline = time.monotonic() + 30
        while True:
            groups = self.api("rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            if (len(rules) == 5 and all(r.get("lastEvaluation", "").startswith("20")
                                        and r["health"] == "ok" for r in rules)) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(len(rules), 5, groups)
        for rule in rules:
            self.assertEqual(rule["type"], "alerting")
            self.assertEqual(rule["health"], "ok", rule)
            self.assertEqual(rule["state"], "inactive", rule)  # A healthy server.

    def test_every_dashboard_and_rule_metric_is_exported(self):
        exported = {name for name, _ in harness.parse_metrics(self.server.metrics())}
        # Prometheus' own synthetic series.
        exported.add("up")
        for source, expr in dashboard_expressions() + rule_expressions():
            names = metric_names(expr)
            self.assertTrue(names, f"{source}: no metric in {expr}")
            self.assertLessEqual(names, exported, f"{source}: {expr}")

    def test_every_dashboard_query_returns_data(self):
        for title, expr in dashboard_expressions():
            with self.subTest(panel=title, expr=expr):
                result = self.query_until_data(expr)
                self.assertTrue(result, f"{title}: no data for {expr}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
