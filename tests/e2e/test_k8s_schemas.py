"""deploy/k8s/*.yaml validated against the Kubernetes API's JSON schemas
(the kubernetes-models npm package, generated from the Kubernetes OpenAPI
spec; @kubernetes-models/prometheus-operator for the ServiceMonitor), with
fields the schemas do not define reported too, and the operational rules
they follow: the HPA alone owns the replica count, no
service-account token is mounted, ephemeral storage is requested and
limited, and a NetworkPolicy opens only the gRPC and metrics ports.

deploy/k8s/sidecar/ and the profiles ConfigMap of deploy/k8s/kserve/ are
core kinds and are validated the same way. KServe's ServingRuntime and
InferenceService are CRDs with no schema in the pinned packages (and none
that can be fetched offline): the core types they embed - the runtime's
container merged with the InferenceService's overrides, the predictor's pod
fields - are validated as the Pod KServe builds from them, and their KServe
fields are checked here against the field lists of KServe's API types.

The validator (tests/e2e/k8s_schema/validate.mjs) runs under Node.js with
the packages pinned by the committed package-lock.json, installed by
`npm ci` into E2E_K8S_SCHEMA_DIR (the build tree) on every run; node and
npm come from deploy/install-deps.sh --test. Without them the test fails."""

import copy
import glob
import json
import os
import shutil
import subprocess
import unittest

import yaml

SOURCE_DIR = os.environ.get(
    "E2E_SOURCE_DIR",
    os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "k8s")
SCHEMA_SOURCE = os.path.join(SOURCE_DIR, "tests", "e2e", "k8s_schema")
WORK_DIR = os.environ.get("E2E_K8S_SCHEMA_DIR",
                          os.path.join(SOURCE_DIR, "build", "k8s_schema"))


def tool(name):
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} not installed: run deploy/install-deps.sh --test")
    return path


def load_objects(directory=K8S_DIR):
    objects = []
    for path in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document:
                    objects.append({"source": os.path.relpath(path, SOURCE_DIR),
                                    "object": document})
    return objects


# Fields of KServe's API types (KServe's Go types:
# pkg/apis/serving/v1alpha1/servingruntime_types.go ServingRuntimeSpec with
# its inline ServingRuntimePodSpec and SupportedModelFormat;
# pkg/apis/serving/v1beta1/predictor.go PredictorSpec and
# PredictorExtensionSpec, component.go ComponentExtensionSpec, model.go
# ModelSpec). A field outside these would be dropped by the API server.
SERVING_RUNTIME_SPEC_FIELDS = {
    "supportedModelFormats", "multiModel", "disabled", "protocolVersions",
    "workerSpec", "containers", "volumes", "nodeSelector", "affinity",
    "tolerations", "labels", "annotations", "imagePullSecrets", "hostIPC",
    "grpcEndpoint", "grpcDataEndpoint", "httpDataEndpoint", "replicas",
    "storageHelper", "builtInAdapter"}
SUPPORTED_MODEL_FORMAT_FIELDS = {"name", "version", "autoSelect", "priority"}
PROTOCOL_VERSIONS = {"v1", "v2", "grpc-v1", "grpc-v2"}
COMPONENT_EXTENSION_FIELDS = {
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric",
    "containerConcurrency", "timeout", "canaryTrafficPercent", "logger",
    "batcher", "labels", "annotations", "deploymentStrategy"}
SCALE_METRICS = {"cpu", "memory", "concurrency", "rps"}
# ModelSpec's own fields; the rest of a model is a corev1.Container override.
MODEL_FIELDS = {"modelFormat", "runtime", "storageUri", "runtimeVersion",
                "protocolVersion", "storage"}
KSERVE_DEPLOYMENT_MODES = {"Serverless", "RawDeployment", "ModelMesh"}


def kserve_pod(runtime, isvc):
    """The Pod KServe builds for the InferenceService's predictor: the
    predictor's pod fields, and the runtime's kserve-container with the
    model's container overrides merged in (env and volumeMounts by name,
    other fields replaced), as KServe merges them."""
    predictor = dict(isvc["spec"]["predictor"])
    model = predictor.pop("model")
    for field in COMPONENT_EXTENSION_FIELDS:
        predictor.pop(field, None)
    [container] = [dict(c) for c in runtime["spec"]["containers"]
                   if c["name"] == "kserve-container"]
    for field, value in model.items():
        if field in MODEL_FIELDS:
            continue
        if field in ("env", "volumeMounts"):
            merged = {item["name"]: item for item in container.get(field, [])}
            merged.update({item["name"]: item for item in value})
            container[field] = list(merged.values())
        else:
            container[field] = value
    spec = dict(predictor)
    spec["containers"] = [container]
    spec["volumes"] = runtime["spec"].get("volumes", []) + predictor.get("volumes", [])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{isvc['metadata']['name']}-predictor"},
            "spec": spec}


def validate(objects):
    """Runs validate.mjs; returns (exit code, per-object results)."""
    result = subprocess.run(
        [tool("node"), os.path.join(WORK_DIR, "validate.mjs")],
        input=json.dumps(objects), capture_output=True, text=True,
        timeout=120, cwd=WORK_DIR, check=False)
    if result.returncode not in (0, 1):
        raise AssertionError(f"validate.mjs failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result.returncode, json.loads(result.stdout)


class SchemaTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # npm ci from the committed lock file, in the build tree (the source
        # tree gets no node_modules).
        os.makedirs(WORK_DIR, exist_ok=True)
        for name in ("package.json", "package-lock.json", "validate.mjs"):
            shutil.copy(os.path.join(SCHEMA_SOURCE, name), WORK_DIR)
        result = subprocess.run(
            [tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            capture_output=True, text=True, timeout=600, cwd=WORK_DIR,
            stdin=subprocess.DEVNULL, check=False)
        if result.returncode != 0:
            raise AssertionError(f"npm ci failed:\n{result.stdout}\n{result.stderr}")
        cls.objects = load_objects()

    def test_every_manifest_matches_its_schema(self):
        kinds = {o["object"]["kind"] for o in self.objects}
        self.assertEqual(kinds, {"Deployment", "Service", "HorizontalPodAutoscaler",
                                 "PodDisruptionBudget", "ServiceMonitor",
                                 "NetworkPolicy"})
        code, results = validate(self.objects)
        self.assertEqual(len(results), len(self.objects))
        for result in results:
            with self.subTest(source=result["source"], kind=result["kind"]):
                self.assertEqual(result["errors"], [])
                self.assertEqual(result["unknown"], [])
        self.assertEqual(code, 0)

    def kserve(self):
        by_kind = {o["object"]["kind"]: o["object"]
                   for o in load_objects(os.path.join(K8S_DIR, "kserve"))}
        return by_kind["ServingRuntime"], by_kind["InferenceService"], by_kind

    def test_sidecar_and_profiles_match_their_schemas(self):
        objects = (load_objects(os.path.join(K8S_DIR, "sidecar"))
                   + [o for o in load_objects(os.path.join(K8S_DIR, "kserve"))
                      if o["object"]["kind"] == "ConfigMap"])
        self.assertEqual(sorted(o["object"]["kind"] for o in objects),
                         ["ConfigMap", "Deployment"])
        code, results = validate(objects)
        for result in results:
            with self.subTest(source=result["source"], kind=result["kind"]):
                self.assertEqual(result["errors"], [])
                self.assertEqual(result["unknown"], [])
        self.assertEqual(code, 0)

    def test_kserve_predictor_pod_matches_the_pod_schema(self):
        runtime, isvc, _ = self.kserve()
        pod = kserve_pod(runtime, isvc)
        # The merge took the InferenceService's overrides.
        [container] = pod["spec"]["containers"]
        self.assertIn("PHASOR_PROFILES", [e["name"] for e in container["env"]])
        code, [result] = validate([{"source": "deploy/k8s/kserve", "object": pod}])
        self.assertEqual(result["errors"], [])
        self.assertEqual(result["unknown"], [])
        self.assertEqual(code, 0)

    def test_the_validator_catches_broken_kserve_containers(self):
        runtime, isvc, _ = self.kserve()
        runtime = copy.deepcopy(runtime)
        container = runtime["spec"]["containers"][0]
        container["readinesProbe"] = container.pop("readinessProbe")
        isvc = copy.deepcopy(isvc)
        isvc["spec"]["predictor"]["securityContext"]["runAsUser"] = "phasor"
        code, [result] = validate([{"source": "broken",
                                    "object": kserve_pod(runtime, isvc)}])
        self.assertEqual(code, 1)
        self.assertEqual(result["unknown"], ["/spec/containers/0/readinesProbe"])
        self.assertIn("runAsUser must be integer", " ".join(result["errors"]))

    def test_the_validator_catches_broken_objects(self):
        deployment = next(o for o in self.objects
                          if o["object"]["kind"] == "Deployment")
        broken = []
        wrong_type = copy.deepcopy(deployment)
        container = wrong_type["object"]["spec"]["template"]["spec"]["containers"][0]
        container["ports"][0]["containerPort"] = "fifty"
        broken.append(wrong_type)
        missing = copy.deepcopy(deployment)
        del missing["object"]["spec"]["selector"]
        broken.append(missing)
        typo = copy.deepcopy(deployment)
        typo["object"]["spec"]["template"]["spec"]["automountServiceAcountToken"] = False
        broken.append(typo)
        policy = copy.deepcopy(next(o for o in self.objects
                                    if o["object"]["kind"] == "NetworkPolicy"))
        policy["object"]["spec"]["policyTypes"] = "Ingress"  # Not a list.
        broken.append(policy)
        code, results = validate(broken)
        self.assertEqual(code, 1)
        self.assertIn("containerPort must be integer", " ".join(results[0]["errors"]))
        self.assertIn("selector", " ".join(results[1]["errors"]))
        self.assertEqual(results[2]["unknown"],
                         ["/spec/template/spec/automountServiceAcountToken"])
        self.assertTrue(results[3]["errors"])


class KServeFieldsTest(unittest.TestCase):
    """The KServe fields of deploy/k8s/kserve/, which no schema covers."""

    @classmethod
    def setUpClass(cls):
        by_kind = {o["object"]["kind"]: o["object"]
                   for o in load_objects(os.path.join(K8S_DIR, "kserve"))}
        cls.runtime = by_kind["ServingRuntime"]
        cls.isvc = by_kind["InferenceService"]

    def test_serving_runtime_fields(self):
        spec = self.runtime["spec"]
        self.assertEqual(set(self.runtime), {"apiVersion", "kind", "metadata", "spec"})
        self.assertLessEqual(set(spec), SERVING_RUNTIME_SPEC_FIELDS)
        self.assertTrue(spec["supportedModelFormats"])
        for model_format in spec["supportedModelFormats"]:
            self.assertLessEqual(set(model_format), SUPPORTED_MODEL_FORMAT_FIELDS)
            self.assertIsInstance(model_format["name"], str)
            self.assertIsInstance(model_format.get("autoSelect", False), bool)
        self.assertLessEqual(set(spec["protocolVersions"]), PROTOCOL_VERSIONS)
        self.assertIsInstance(spec.get("multiModel", False), bool)
        for key, value in spec.get("annotations", {}).items():
            self.assertIsInstance(value, str, key)  # map[string]string
        self.assertIn("kserve-container", [c["name"] for c in spec["containers"]])

    def test_inference_service_fields(self):
        self.assertEqual(set(self.isvc), {"apiVersion", "kind", "metadata", "spec"})
        self.assertEqual(set(self.isvc["spec"]), {"predictor"})
        mode = self.isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"]
        self.assertIn(mode, KSERVE_DEPLOYMENT_MODES)
        predictor = self.isvc["spec"]["predictor"]
        self.assertIn(predictor["scaleMetric"], SCALE_METRICS)
        for field in ("minReplicas", "maxReplicas", "scaleTarget"):
            self.assertIsInstance(predictor[field], int, field)
        self.assertLessEqual(predictor["minReplicas"], predictor["maxReplicas"])
        model = predictor["model"]
        self.assertEqual(set(model["modelFormat"]), {"name"})
        self.assertIn(model["protocolVersion"], PROTOCOL_VERSIONS)
        self.assertIsInstance(model["runtime"], str)
        # Everything else in the model is a container override, validated
        # against the Pod schema by SchemaTest; a container's name and image
        # come from the runtime.
        self.assertNotIn("name", model)
        self.assertNotIn("image", model)


class OperationsRulesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.by_kind = {}
        for item in load_objects():
            cls.by_kind.setdefault(item["object"]["kind"], []).append(item["object"])
        cls.deployment = cls.by_kind["Deployment"][0]
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]

    def test_replicas_left_to_the_hpa(self):
        self.assertNotIn("replicas", self.deployment["spec"])
        hpa = self.by_kind["HorizontalPodAutoscaler"][0]
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["name"],
                         self.deployment["metadata"]["name"])
        self.assertGreaterEqual(hpa["spec"]["minReplicas"], 2)

    def test_no_service_account_token(self):
        self.assertIs(self.pod["spec"]["automountServiceAccountToken"], False)

    def test_ephemeral_storage_requested_and_limited(self):
        resources = self.container["resources"]
        self.assertIn("ephemeral-storage", resources["requests"])
        self.assertIn("ephemeral-storage", resources["limits"])

    def test_network_policy_opens_only_grpc_and_metrics(self):
        [policy] = self.by_kind["NetworkPolicy"]
        labels = self.pod["metadata"]["labels"]
        selector = policy["spec"]["podSelector"]["matchLabels"]
        self.assertTrue(all(labels.get(k) == v for k, v in selector.items()))
        self.assertEqual(policy["spec"]["policyTypes"], ["Ingress"])
        named = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        opened = set()
        for rule in policy["spec"]["ingress"]:
            self.assertTrue(rule.get("ports"), "a rule without ports opens all")
            for port in rule["ports"]:
                self.assertEqual(port.get("protocol", "TCP"), "TCP")
                opened.add(named.get(port["port"], port["port"]))
        self.assertEqual(opened, {50051, 9464})


if __name__ == "__main__":
    unittest.main(verbosity=2)
