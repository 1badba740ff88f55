"""The deployment files parse and carry what operations rely on: native gRPC
probes, a drain that fits in the termination grace period, a headless
Service for client-side balancing, a non-root exec-form container, and
PHASOR_* variables that the server actually reads. The KServe runtime
(deploy/k8s/kserve/) and the shared-memory sidecar (deploy/k8s/sidecar/)
carry deployment.yaml's container settings, and the server settings each of
them gives phasor-server are started once on loopback (ports the server
picks itself, stopped by pid): the profiles ConfigMap loads and its profiles
are ready models, and the sidecar's shared-memory settings are the ones the
server enforces.

No Docker engine or cluster is needed: the files are checked as data."""

import glob
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

SOURCE_DIR = os.environ.get(
    "E2E_SOURCE_DIR",
    os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "k8s")


def load_k8s(directory=K8S_DIR):
    """{kind: [documents]} over every *.yaml of `directory` (deploy/k8s)."""
    by_kind = {}
    files = sorted(glob.glob(os.path.join(directory, "*.yaml")))
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


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def with_container_name(env, name):
    """deployment.yaml's env with resourceFieldRef.containerName = name."""
    renamed = json.loads(json.dumps(env))
    for entry in renamed.values():
        field = entry.get("valueFrom", {}).get("resourceFieldRef")
        if field is not None:
            field["containerName"] = name
    return renamed


def quantity_bytes(text):
    """A Kubernetes memory quantity ("1Gi", "512Mi", "1073741824") in bytes."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", str(text))
    return int(match.group(1)) * units.get(match.group(2), 1)


class KServeManifestTest(unittest.TestCase):
    """deploy/k8s/kserve/: a ServingRuntime with deployment.yaml's container,
    an InferenceService using it, and the profiles ConfigMap it mounts.
    KServe's CRDs are not in the pinned schema packages, so their own
    fields are checked here (test_k8s_schemas.py validates the core types
    they embed)."""

    @classmethod
    def setUpClass(cls):
        cls.files, cls.by_kind = load_k8s(os.path.join(K8S_DIR, "kserve"))
        _, base = load_k8s()
        deployment = base["Deployment"][0]
        cls.base_pod = deployment["spec"]["template"]["spec"]
        cls.base = cls.base_pod["containers"][0]
        cls.hpa = base["HorizontalPodAutoscaler"][0]
        [cls.runtime] = cls.by_kind["ServingRuntime"]
        [cls.isvc] = cls.by_kind["InferenceService"]
        [cls.profiles] = cls.by_kind["ConfigMap"]
        [cls.container] = cls.runtime["spec"]["containers"]
        cls.predictor = cls.isvc["spec"]["predictor"]
        cls.model = cls.predictor["model"]

    def test_files_and_kinds(self):
        self.assertEqual(len(self.files), 3)
        self.assertEqual(set(self.by_kind),
                         {"ServingRuntime", "InferenceService", "ConfigMap"})
        self.assertEqual(self.runtime["apiVersion"], "serving.kserve.io/v1alpha1")
        self.assertEqual(self.isvc["apiVersion"], "serving.kserve.io/v1beta1")
        self.assertEqual(self.profiles["apiVersion"], "v1")

    def test_runtime_speaks_grpc_v2_on_an_h2c_port(self):
        spec = self.runtime["spec"]
        self.assertEqual(spec["protocolVersions"], ["grpc-v2"])
        formats = {f["name"]: f for f in spec["supportedModelFormats"]}
        self.assertIs(formats["phasor"]["autoSelect"], True)
        # KServe merges the InferenceService's overrides into the container
        # of this name.
        self.assertEqual(self.container["name"], "kserve-container")
        # One port, named h2c: KServe routes gRPC (HTTP/2 cleartext) to it.
        self.assertEqual(self.container["ports"],
                         [{"name": "h2c", "containerPort": 50051,
                           "protocol": "TCP"}])
        env = env_of(self.container)
        self.assertEqual(env["PHASOR_GRPC_ADDRESS"]["value"], "0.0.0.0:50051")
        # The metrics port is not declared; KServe learns it from these.
        metrics_port = env["PHASOR_METRICS_ADDRESS"]["value"].rsplit(":", 1)[1]
        self.assertEqual(spec["annotations"]["prometheus.kserve.io/port"],
                         metrics_port)
        self.assertEqual(spec["annotations"]["prometheus.kserve.io/path"],
                         "/metrics")

    def test_runtime_container_is_deployment_yamls(self):
        self.assertEqual(self.container["image"], self.base["image"])
        self.assertEqual(self.container["imagePullPolicy"],
                         self.base["imagePullPolicy"])
        self.assertEqual(env_of(self.container),
                         with_container_name(env_of(self.base), "kserve-container"))
        for field in ("resources", "startupProbe", "readinessProbe",
                      "livenessProbe", "lifecycle"):
            self.assertEqual(self.container[field], self.base[field], field)
        self.assertEqual(self.container["readinessProbe"]["grpc"],
                         {"port": 50051, "service": "phasor.v1.Encoder"})
        # A ServingRuntime has no pod securityContext: the container carries
        # deployment.yaml's pod-level settings as well as its own.
        expected = dict(self.base_pod["securityContext"])
        expected.update(self.base["securityContext"])
        self.assertEqual(self.container["securityContext"], expected)
        self.assertTrue(self.container["securityContext"]["runAsNonRoot"])

    def test_inference_service_uses_the_runtime(self):
        self.assertEqual(
            self.isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"],
            "RawDeployment")
        self.assertEqual(self.model["modelFormat"]["name"], "phasor")
        self.assertIn(self.model["modelFormat"]["name"],
                      [f["name"] for f in self.runtime["spec"]["supportedModelFormats"]])
        self.assertEqual(self.model["runtime"], self.runtime["metadata"]["name"])
        self.assertEqual(self.model["protocolVersion"], "grpc-v2")
        self.assertIn(self.model["protocolVersion"],
                      self.runtime["spec"]["protocolVersions"])
        # The models are the profiles file: nothing for KServe to download.
        self.assertNotIn("storageUri", self.model)
        self.assertNotIn("storage", self.model)

    def test_inference_service_mounts_the_profiles(self):
        volumes = {v["name"]: v for v in self.predictor["volumes"]}
        mounts = {m["name"]: m for m in self.model["volumeMounts"]}
        self.assertEqual(set(volumes), set(mounts))
        [name] = [n for n, v in volumes.items()
                  if v.get("configMap", {}).get("name")
                  == self.profiles["metadata"]["name"]]
        self.assertIs(mounts[name]["readOnly"], True)
        [key] = self.profiles["data"]
        self.assertEqual(env_of(self.model)["PHASOR_PROFILES"]["value"],
                         os.path.join(mounts[name]["mountPath"], key))

    def test_inference_service_pod_is_deployment_yamls(self):
        for field in ("securityContext", "automountServiceAccountToken",
                      "terminationGracePeriodSeconds"):
            self.assertEqual(self.predictor[field], self.base_pod[field], field)
        # Autoscaling as hpa.yaml: KServe makes the HPA from these.
        self.assertEqual(self.predictor["minReplicas"],
                         self.hpa["spec"]["minReplicas"])
        self.assertEqual(self.predictor["maxReplicas"],
                         self.hpa["spec"]["maxReplicas"])
        [cpu] = [m for m in self.hpa["spec"]["metrics"] if m["type"] == "Resource"]
        self.assertEqual(self.predictor["scaleMetric"], "cpu")
        self.assertEqual(self.predictor["scaleTarget"],
                         cpu["resource"]["target"]["averageUtilization"])

    def test_env_names_real_server_flags(self):
        flags = server_flag_names()
        for container in (self.container, self.model):
            for name in env_of(container):
                self.assertTrue(name.startswith("PHASOR_"), name)
                self.assertIn(name[len("PHASOR_"):].lower(), flags, name)


class SidecarManifestTest(unittest.TestCase):
    """deploy/k8s/sidecar/: a model server and phasor-server in one pod,
    sharing /dev/shm through a memory-backed emptyDir."""

    @classmethod
    def setUpClass(cls):
        cls.files, cls.by_kind = load_k8s(os.path.join(K8S_DIR, "sidecar"))
        _, base = load_k8s()
        cls.base_pod = base["Deployment"][0]["spec"]["template"]["spec"]
        cls.base = cls.base_pod["containers"][0]
        [cls.deployment] = cls.by_kind["Deployment"]
        cls.pod = cls.deployment["spec"]["template"]
        cls.containers = {c["name"]: c for c in cls.pod["spec"]["containers"]}
        cls.phasor = cls.containers["phasor"]
        cls.env = env_of(cls.phasor)

    def test_one_deployment_of_two_containers(self):
        self.assertEqual(set(self.by_kind), {"Deployment"})
        self.assertEqual(self.deployment["apiVersion"], "apps/v1")
        self.assertEqual(len(self.containers), 2)
        self.assertTrue(matches(self.deployment["spec"]["selector"]["matchLabels"],
                                self.pod["metadata"]["labels"]))

    def test_phasor_serves_system_shared_memory(self):
        self.assertIn("--system_shared_memory=true", self.phasor["args"])
        self.assertEqual(self.phasor["image"], self.base["image"])
        # All interfaces: 127.0.0.1 for the model server next to it, the pod
        # IP for the kubelet's probes.
        self.assertEqual(self.env["PHASOR_GRPC_ADDRESS"]["value"], "0.0.0.0:50051")
        ports = {p["name"]: p["containerPort"] for p in self.phasor["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "metrics": 9464})
        for field in ("resources", "startupProbe", "readinessProbe",
                      "livenessProbe", "lifecycle", "securityContext"):
            self.assertEqual(self.phasor[field], self.base[field], field)
        grace = float(self.env["PHASOR_SHUTDOWN_GRACE_SECONDS"]["value"])
        pre_stop = float(self.phasor["lifecycle"]["preStop"]["exec"]["command"][1])
        self.assertGreater(self.pod["spec"]["terminationGracePeriodSeconds"],
                           pre_stop + grace)

    def test_shm_is_one_memory_backed_emptydir_in_both_containers(self):
        volumes = {v["name"]: v for v in self.pod["spec"]["volumes"]}
        shm = [name for name, v in volumes.items()
               if v.get("emptyDir", {}).get("medium") == "Memory"]
        self.assertEqual(len(shm), 1)
        size_limit = quantity_bytes(volumes[shm[0]]["emptyDir"]["sizeLimit"])
        self.assertGreater(size_limit, 0)
        for name, container in self.containers.items():
            mounts = [m for m in container["volumeMounts"] if m["name"] == shm[0]]
            self.assertEqual([m["mountPath"] for m in mounts], ["/dev/shm"], name)
            self.assertFalse(mounts[0].get("readOnly", False), name)
        # The server never maps more than the volume can hold.
        self.assertLessEqual(int(self.env["PHASOR_SHARED_MEMORY_MAX_BYTES"]["value"]),
                             size_limit)

    def test_both_containers_run_as_one_non_root_user(self):
        # Objects one creates (mode 0600, as tritonclient does) must open
        # read-write in the other: one uid for both, from the pod.
        security = self.pod["spec"]["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        self.assertNotEqual(security["runAsUser"], 0)
        for name, container in self.containers.items():
            self.assertNotIn("runAsUser", container.get("securityContext", {}), name)
            self.assertFalse(container["securityContext"]["allowPrivilegeEscalation"],
                             name)
        self.assertIs(self.pod["spec"]["automountServiceAccountToken"], False)

    def test_env_names_real_server_flags(self):
        flags = server_flag_names()
        for name in self.env:
            self.assertTrue(name.startswith("PHASOR_"), name)
            self.assertIn(name[len("PHASOR_"):].lower(), flags, name)
        for argument in self.phasor["args"]:
            self.assertIn(argument[2:].split("=")[0], flags, argument)


# --- The manifests' server settings, run -------------------------------------

SERVER_BIN = os.environ.get("E2E_SERVER_BIN", "")
STARTUP_TIMEOUT_S = 30.0
RPC_TIMEOUT_S = 10.0


def compile_inference_protocol(directory):
    """grpc_service_pb2 of proto/inference/grpc_service.proto."""
    proto_dir = os.path.join(SOURCE_DIR, "proto")
    subprocess.run([shutil.which("protoc") or "/usr/bin/protoc",
                    f"--python_out={directory}", f"-I{proto_dir}",
                    os.path.join(proto_dir, "inference", "grpc_service.proto")],
                   check=True, timeout=60)
    sys.path.insert(0, directory)
    from inference import grpc_service_pb2  # noqa: E402
    return grpc_service_pb2


def container_environment(container, files=None):
    """The PHASOR_* environment a container's env list gives phasor-server.
    resourceFieldRef limits.cpu resolves as the kubelet does (rounded up,
    divisor 1); `files` maps a variable to a local path replacing its value
    (a file mounted in the pod)."""
    env = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = entry["value"]
            continue
        field = entry["valueFrom"]["resourceFieldRef"]
        assert field["resource"] == "limits.cpu", field
        limit = str(container["resources"]["limits"]["cpu"])
        cores = int(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
        env[name] = str(math.ceil(cores / float(field.get("divisor", "1"))))
    env.update(files or {})
    return env


class ManifestServer:
    """phasor-server started with a manifest container's environment and
    arguments, on a loopback port it picks itself (read back from its
    `serving` log record), without metrics; stopped by its pid."""

    def __init__(self, env, args=()):
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("PHASOR_")}
        self.env.update(env)
        self.args = list(args)
        self.process = None
        self.log_file = None
        self.final_log = ""
        self.exit_code = None
        self.port = None

    def records(self):
        self.log_file.flush()
        self.log_file.seek(0)
        return [json.loads(line) for line in self.log_file if line.startswith("{")]

    def log(self):
        if self.log_file.closed:
            return self.final_log
        self.log_file.flush()
        self.log_file.seek(0)
        return self.log_file.read()

    def __enter__(self):
        self.log_file = tempfile.TemporaryFile(mode="w+")
        # The command line wins over the environment: only the addresses
        # change, so the test binds 127.0.0.1 and never the manifest's ports.
        self.process = subprocess.Popen(
            [SERVER_BIN, "--grpc_address=127.0.0.1:0", "--metrics_address=",
             *self.args],
            stdout=self.log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while self.port is None:
            if self.process.poll() is not None:
                raise AssertionError(f"phasor-server exited with "
                                     f"{self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"phasor-server not serving after "
                                     f"{STARTUP_TIMEOUT_S} s:\n{self.log()}")
            for record in self.records():
                if record.get("event") == "serving":
                    self.port = record["grpc_port"]
            time.sleep(0.05)
        return self

    def config(self):
        return next(r for r in self.records() if r.get("event") == "config")

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout=STARTUP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STARTUP_TIMEOUT_S)
                raise
        return self.process.returncode

    def __exit__(self, *exc_info):
        try:
            self.exit_code = self.stop()
        finally:
            self.final_log = self.log()
            self.log_file.close()


class ManifestSettingsRunTest(unittest.TestCase):
    """phasor-server accepts what the KServe runtime, the InferenceService
    and the sidecar configure, and behaves as their comments say."""

    @classmethod
    def setUpClass(cls):
        if not SERVER_BIN:
            raise AssertionError("E2E_SERVER_BIN is not set (run through ctest)")
        import grpc  # noqa: E402
        cls.grpc = grpc
        cls.proto_dir = tempfile.mkdtemp(prefix="phasor-manifest-proto-")
        cls.pb = compile_inference_protocol(cls.proto_dir)
        _, cls.kserve = load_k8s(os.path.join(K8S_DIR, "kserve"))
        _, sidecar = load_k8s(os.path.join(K8S_DIR, "sidecar"))
        pod = sidecar["Deployment"][0]["spec"]["template"]["spec"]
        cls.sidecar = next(c for c in pod["containers"] if c["name"] == "phasor")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.proto_dir, ignore_errors=True)

    def call(self, port, method, request, response_type):
        with self.grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            rpc = channel.unary_unary(
                f"/inference.GRPCInferenceService/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_type.FromString)
            return rpc(request, timeout=RPC_TIMEOUT_S)

    def status_code(self, port, method, request, response_type):
        try:
            self.call(port, method, request, response_type)
            return self.grpc.StatusCode.OK
        except self.grpc.RpcError as error:
            return error.code()

    def test_inference_service_serves_every_profile_as_a_model(self):
        [runtime] = self.kserve["ServingRuntime"]
        [isvc] = self.kserve["InferenceService"]
        [profiles] = self.kserve["ConfigMap"]
        [(key, text)] = profiles["data"].items()
        names = re.findall(r'^\s*name:\s*"([^"]+)"', text, re.MULTILINE)
        self.assertIn("rope-llama3", names)  # The model docs/DEPLOY.md calls.
        with tempfile.TemporaryDirectory() as mount:
            # The ConfigMap as the kubelet mounts it: one file per key.
            with open(os.path.join(mount, key), "w") as f:
                f.write(text)
            container = dict(runtime["spec"]["containers"][0])
            container["env"] = (container["env"]
                                + isvc["spec"]["predictor"]["model"]["env"])
            env = container_environment(
                container, {"PHASOR_PROFILES": os.path.join(mount, key)})
            with ManifestServer(env, container.get("args", ())) as server:
                config = server.config()
                self.assertEqual(config["profiles"], names)
                self.assertFalse(config["system_shared_memory"])
                for name in names:
                    for version in ("", "1"):
                        response = self.call(
                            server.port, "ModelReady",
                            self.pb.ModelReadyRequest(name=name, version=version),
                            self.pb.ModelReadyResponse)
                        self.assertTrue(response.ready, (name, version))
                self.assertEqual(
                    self.status_code(server.port, "ModelReady",
                                     self.pb.ModelReadyRequest(name="no-such-profile"),
                                     self.pb.ModelReadyResponse),
                    self.grpc.StatusCode.NOT_FOUND)
                # Off unless asked for, as the runtime does not.
                self.assertEqual(
                    self.status_code(server.port, "SystemSharedMemoryStatus",
                                     self.pb.SystemSharedMemoryStatusRequest(),
                                     self.pb.SystemSharedMemoryStatusResponse),
                    self.grpc.StatusCode.UNIMPLEMENTED)
            self.assertEqual(server.exit_code, 0, server.log())

    def test_sidecar_maps_keys_under_its_prefix_only(self):
        from multiprocessing import shared_memory
        env = container_environment(self.sidecar)
        prefix = env["PHASOR_SHARED_MEMORY_KEY_PREFIX"]
        self.assertTrue(prefix.startswith("/"))
        # Objects as the model server would create them in /dev/shm:
        # shm_open("/<name>"), which Python's SharedMemory does for `name`.
        names = (f"{prefix[1:]}-manifest-test-{os.getpid()}",
                 f"manifest-test-outside-{os.getpid()}")
        self.assertFalse(f"/{names[1]}".startswith(prefix))
        segments = []
        try:
            for name in names:
                segments.append(shared_memory.SharedMemory(
                    name=name, create=True, size=4096))
            inside, outside = segments
            with ManifestServer(env, self.sidecar["args"]) as server:
                self.assertTrue(server.config()["system_shared_memory"])
                register = self.pb.SystemSharedMemoryRegisterRequest
                self.assertEqual(
                    self.status_code(server.port, "SystemSharedMemoryRegister",
                                     register(name="inside", key=f"/{inside.name.lstrip('/')}",
                                              offset=0, byte_size=4096),
                                     self.pb.SystemSharedMemoryRegisterResponse),
                    self.grpc.StatusCode.OK)
                with self.assertRaises(self.grpc.RpcError) as refused:
                    self.call(server.port, "SystemSharedMemoryRegister",
                              register(name="outside",
                                       key=f"/{outside.name.lstrip('/')}",
                                       offset=0, byte_size=4096),
                              self.pb.SystemSharedMemoryRegisterResponse)
                self.assertEqual(refused.exception.code(),
                                 self.grpc.StatusCode.PERMISSION_DENIED)
                self.assertIn(f"does not start with the prefix '{prefix}'",
                              refused.exception.details())
                status = self.call(server.port, "SystemSharedMemoryStatus",
                                   self.pb.SystemSharedMemoryStatusRequest(),
                                   self.pb.SystemSharedMemoryStatusResponse)
                self.assertEqual(sorted(status.regions), ["inside"])
            self.assertEqual(server.exit_code, 0, server.log())
        finally:
            for segment in segments:
                segment.close()
                segment.unlink()


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
