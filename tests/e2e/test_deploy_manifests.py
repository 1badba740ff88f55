"""The deployment files parse and carry what operations rely on: native gRPC
probes, a drain that fits in the termination grace period, a headless
Service for client-side balancing, a non-root exec-form container, and
PHASOR_* variables that the server actually reads.

No Docker engine or cluster is needed: the files are checked as data."""

import glob
import json
import os
import re
import shlex
import unittest

import yaml

SOURCE_DIR = os.environ.get(
    "E2E_SOURCE_DIR",
    os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "k8s")


def load_k8s():
    """{kind: [documents]} over every deploy/k8s/*.yaml."""
    by_kind = {}
    files = sorted(glob.glob(os.path.join(K8S_DIR, "*.yaml")))
    for path in files:
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document:
                    by_kind.setdefault(document["kind"], []).append(document)
    return files, by_kind


def server_flag_names():
    """Flag names defined by server/flags.cc (ABSL_FLAG(type, name, ...))."""
    with open(os.path.join(SOURCE_DIR, "server", "flags.cc")) as f:
        return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)", f.read()))


def dockerfile_stages():
    """[(from_line, [(instruction, argument)])] with continuations joined."""
    with open(os.path.join(SOURCE_DIR, "Dockerfile")) as f:
        text = f.read()
    text = re.sub(r"\\\n", " ", text)
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, argument = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            stages.append((argument.strip(), []))
        elif stages:
            stages[-1][1].append((instruction, argument.strip()))
    return stages


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


class KubernetesManifestTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.files, cls.by_kind = load_k8s()
        cls.deployment = cls.by_kind["Deployment"][0]
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]
        cls.env = {e["name"]: e for e in cls.container.get("env", [])}

    def test_every_file_parses_to_known_kinds(self):
        self.assertGreaterEqual(len(self.files), 5)
        self.assertEqual(
            set(self.by_kind),
            {"Deployment", "Service", "HorizontalPodAutoscaler",
             "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy"})
        for kind, documents in self.by_kind.items():
            for document in documents:
                self.assertIn("apiVersion", document, kind)
                self.assertIn("name", document["metadata"], kind)

    def test_native_grpc_probes(self):
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            self.assertEqual(self.container[probe]["grpc"]["port"], 50051,
                             probe)
            self.assertNotIn("httpGet", self.container[probe])
            self.assertNotIn("exec", self.container[probe])
        self.assertEqual(self.container["readinessProbe"]["grpc"]["service"],
                         "phasor.v1.Encoder")

    def test_drain_fits_in_termination_grace(self):
        grace = float(self.env["PHASOR_SHUTDOWN_GRACE_SECONDS"]["value"])
        command = self.container["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(os.path.basename(command[0]), "sleep")
        pre_stop = float(command[1])
        self.assertGreater(pre_stop, 0)
        termination = self.pod["spec"]["terminationGracePeriodSeconds"]
        self.assertGreater(termination, grace)
        # The kubelet counts the preStop hook against the same budget.
        self.assertGreater(termination, pre_stop + grace)

    def test_resources_ports_and_security(self):
        resources = self.container["resources"]
        for part in ("requests", "limits"):
            self.assertIn("cpu", resources[part])
            self.assertIn("memory", resources[part])
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "metrics": 9464})
        self.assertTrue(self.pod["spec"]["securityContext"]["runAsNonRoot"])
        self.assertNotEqual(self.pod["spec"]["securityContext"]["runAsUser"], 0)
        self.assertFalse(
            self.container["securityContext"]["allowPrivilegeEscalation"])

    def test_env_names_real_server_flags(self):
        flags = server_flag_names()
        self.assertIn("shutdown_grace_seconds", flags)
        self.assertTrue(self.env)
        for name in self.env:
            self.assertTrue(name.startswith("PHASOR_"), name)
            self.assertIn(name[len("PHASOR_"):].lower(), flags, name)

    def test_headless_and_regular_services(self):
        services = {s["metadata"]["name"]: s for s in self.by_kind["Service"]}
        headless = [s for s in services.values()
                    if s["spec"].get("clusterIP") == "None"]
        regular = [s for s in services.values()
                   if s["spec"].get("clusterIP") != "None"]
        self.assertEqual(len(headless), 1)
        self.assertEqual(len(regular), 1)
        pod_labels = self.pod["metadata"]["labels"]
        for service in services.values():
            self.assertTrue(matches(service["spec"]["selector"], pod_labels))
            grpc_ports = [p for p in service["spec"]["ports"]
                          if p["name"] == "grpc"]
            self.assertEqual(grpc_ports[0]["port"], 50051)
        self.assertIn("metrics",
                      [p["name"] for p in regular[0]["spec"]["ports"]])

    def test_hpa_pdb_and_service_monitor(self):
        hpa = self.by_kind["HorizontalPodAutoscaler"][0]
        self.assertEqual(hpa["apiVersion"], "autoscaling/v2")
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["name"],
                         self.deployment["metadata"]["name"])
        cpu = [m for m in hpa["spec"]["metrics"] if m["type"] == "Resource"
               and m["resource"]["name"] == "cpu"]
        self.assertEqual(len(cpu), 1)
        self.assertGreaterEqual(hpa["spec"]["minReplicas"], 2)

        pdb = self.by_kind["PodDisruptionBudget"][0]
        self.assertEqual(pdb["apiVersion"], "policy/v1")
        self.assertTrue(matches(pdb["spec"]["selector"]["matchLabels"],
                                self.pod["metadata"]["labels"]))
        # One pod at a time whatever the replica count: minAvailable: 1
        # would let a drain evict all but one of the HPA's pods at once.
        self.assertNotIn("minAvailable", pdb["spec"])
        self.assertEqual(pdb["spec"]["maxUnavailable"], 1)

        monitor = self.by_kind["ServiceMonitor"][0]
        self.assertEqual(monitor["apiVersion"], "monitoring.coreos.com/v1")
        selected = [s for s in self.by_kind["Service"] if matches(
            monitor["spec"]["selector"]["matchLabels"],
            s["metadata"]["labels"])]
        self.assertEqual(len(selected), 1)
        port_names = {p["name"] for p in selected[0]["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            self.assertIn(endpoint["port"], port_names)
            self.assertEqual(endpoint["path"], "/metrics")


class PrometheusConfigTest(unittest.TestCase):
    """Both Prometheus configs scrape /metrics under the job the rules
    select; promtool and a live Prometheus check them further
    (test_prometheus_grafana.py)."""

    def load(self, name):
        with open(os.path.join(SOURCE_DIR, "deploy", "prometheus", name)) as f:
            config = yaml.safe_load(f)
        return {job["job_name"]: job for job in config["scrape_configs"]}, config

    def test_local_config_scrapes_this_machine(self):
        jobs, config = self.load("prometheus.yml")
        self.assertEqual(set(jobs), {"phasor"})
        static = [target for group in jobs["phasor"]["static_configs"]
                  for target in group["targets"]]
        self.assertEqual(static, ["127.0.0.1:9464"])
        # Debian 12's Prometheus has no Kubernetes discovery.
        self.assertNotIn("kubernetes_sd_configs", jobs["phasor"])
        self.assertEqual(config["rule_files"], ["rules.yml"])

    def test_kubernetes_config_discovers_pods(self):
        jobs, config = self.load("prometheus-kubernetes.yml")
        self.assertEqual(set(jobs), {"phasor"})
        self.assertIn("kubernetes_sd_configs", jobs["phasor"])
        self.assertEqual(config["rule_files"], ["rules.yml"])
        for job in jobs.values():
            self.assertEqual(job.get("metrics_path", "/metrics"), "/metrics")


class DockerfileTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.stages = dockerfile_stages()
        cls.runtime = cls.stages[-1][1]

    def instructions(self, name, stage=None):
        stage = self.runtime if stage is None else stage
        return [argument for instruction, argument in stage
                if instruction == name]

    def test_multi_stage_on_bookworm(self):
        self.assertGreaterEqual(len(self.stages), 2)
        builder_from, builder = self.stages[0]
        self.assertTrue(builder_from.startswith("debian:bookworm "), builder_from)
        self.assertTrue(self.stages[-1][0].startswith("debian:bookworm-slim"))
        runs = " ".join(self.instructions("RUN", builder))
        self.assertIn("deploy/install-deps.sh", runs)
        self.assertIn("CMAKE_BUILD_TYPE=Release", runs)
        self.assertIn("phasor-server", runs)
        copies = " ".join(self.instructions("COPY"))
        self.assertIn("--from=builder", copies)
        # The built-in holiday calendars, at the path the server looks at
        # by default from /usr/local/bin (server/profiles.h).
        self.assertIn("/build/server/builtin_holidays.textpb "
                      "/usr/local/share/phasor/", copies)

    def test_runtime_has_only_runtime_libraries(self):
        runs = " ".join(self.instructions("RUN"))
        self.assertIn("--no-install-recommends", runs)
        for package in ("libgrpc++1.51", "libprotobuf32", "libabsl20220623",
                        "libprometheus-cpp-pull1.0",
                        "libprometheus-cpp-core1.0", "libgomp1", "tzdata",
                        "ca-certificates"):
            self.assertIn(package, runs.split())
        self.assertNotRegex(runs, r"\S+-dev\b")

    def test_runtime_installs_every_library_the_binaries_load(self):
        # The packages of the shared libraries the built binaries load
        # (ldd, then dpkg -S) must be installed by the runtime stage, come
        # with bookworm-slim, or be pulled in by a package it installs:
        # a new direct dependency (libhwy1, libquadmath0) fails here until
        # the Dockerfile lists it.
        import shutil
        import subprocess
        binaries = [os.environ.get("E2E_SERVER_BIN"), os.environ.get("E2E_CLIENT_BIN")]
        if not all(binaries) or not shutil.which("dpkg"):
            self.skipTest("needs the built binaries (E2E_*_BIN) and dpkg")
        in_base_image = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
        # Dependencies of libgrpc++1.51 and libprometheus-cpp-pull1.0.
        pulled_in = {"libgrpc29", "libssl3", "libre2-9", "libc-ares2", "libcivetweb1"}
        installed = set(" ".join(self.instructions("RUN")).split())
        # Each library under the names dpkg may know it by: as ldd printed
        # it, resolved, or (merged /usr) without the /usr prefix. One dpkg -S
        # for all of them: each call reads dpkg's whole database.
        candidates = {}
        for binary in binaries:
            output = subprocess.run(["ldd", binary], capture_output=True, text=True,
                                    check=True, timeout=60).stdout
            for line in output.splitlines():
                parts = line.split("=>")
                if len(parts) != 2 or not parts[1].split():
                    continue
                path = parts[1].split()[0]
                real = os.path.realpath(path)
                candidates[path] = [path, real, re.sub(r"^/usr/lib/", "/lib/", real)]
        names = sorted({name for names in candidates.values() for name in names})
        # dpkg -S exits 1 when some name has no owner; the others still print.
        listing = subprocess.run(["dpkg", "-S", *names], capture_output=True,
                                 text=True, timeout=120).stdout
        owners = {}
        for line in listing.splitlines():
            package, _, owned = line.partition(": ")
            for path in owned.split(", "):
                owners[path.strip()] = package.split(":")[0]
        packages = set()
        for path, names_of_path in candidates.items():
            owner = next((owners[n] for n in names_of_path if n in owners), "")
            self.assertTrue(owner, f"no package owns {path}")
            packages.add(owner)
        self.assertIn("libhwy1", packages)  # The check sees real libraries.
        missing = packages - installed - in_base_image - pulled_in
        self.assertFalse(missing, f"the runtime stage does not install {sorted(missing)}")

    def test_non_root_user(self):
        users = self.instructions("USER")
        self.assertTrue(users)
        user = users[-1].split(":")[0]
        self.assertNotIn(user, ("root", "0"))
        # The last USER (the one the process runs as) precedes ENTRYPOINT.
        order = [instruction for instruction, _ in self.runtime]
        last_user = len(order) - 1 - order[::-1].index("USER")
        self.assertLess(last_user, order.index("ENTRYPOINT"))

    def test_exec_form_entrypoint_and_ports(self):
        entrypoint = self.instructions("ENTRYPOINT")[-1]
        parsed = json.loads(entrypoint)  # Exec form is a JSON array.
        self.assertIsInstance(parsed, list)
        self.assertTrue(parsed[0].endswith("phasor-server"))
        exposed = {int(p.split("/")[0]) for argument in
                   self.instructions("EXPOSE") for p in shlex.split(argument)}
        self.assertEqual(exposed, {50051, 9464})

    def test_dockerignore_keeps_context_small(self):
        with open(os.path.join(SOURCE_DIR, ".dockerignore")) as f:
            patterns = {line.strip() for line in f
                        if line.strip() and not line.startswith("#")}
        self.assertIn(".git", patterns)
        self.assertTrue({"build", "build-*"} <= patterns)


if __name__ == "__main__":
    unittest.main(verbosity=2)
