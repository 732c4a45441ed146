"""Validates docker/k8s/*.yaml and docker/compose.scale.yaml without a cluster.

1. Schema: every document of every manifest is validated with python3-jsonschema
   against tests/docker/k8s_schemas.json, keyed by apiVersion/kind (the fields
   of the built-in kinds used here, the required fields of the custom
   resources); configuration files carried in ConfigMaps (the endpoint
   picker's EndpointPickerConfig, prometheus-adapter's rules) are parsed and
   validated too. A kind without a schema fails: add its schema with it.
2. Consistency: the numbers and names that must agree across files (selectors,
   ports, probe budgets against the grace period, metric names against the
   ones gemma-serve exports in server/ops/server_metrics.cc, HAProxy's servers
   against compose's replicas).
3. The validator rejects broken copies (so a schema that accepts anything
   cannot pass silently).

Usage: python3 tests/docker/k8s_manifests_test.py [--repo DIR]
"""
import argparse
import copy
import glob
import json
import os
import re
import sys
import unittest

import yaml

try:
    import jsonschema
except ImportError:  # Debian: python3-jsonschema (scripts/setup.sh installs it)
    sys.exit("k8s_manifests_test: python3-jsonschema is missing (apt-get install python3-jsonschema)")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "k8s_schemas.json")


class Validator:
    def __init__(self, path):
        with open(path) as f:
            self.doc = json.load(f)
        cls = jsonschema.Draft202012Validator
        cls.check_schema(self.doc)
        self.kinds = {k: cls({**s, "$defs": self.doc["$defs"]}) for k, s in self.doc["kinds"].items()}
        self.configs = {k: cls({**s, "$defs": self.doc["$defs"]}) for k, s in self.doc["configs"].items()}

    @staticmethod
    def _messages(validator, obj, where):
        return [f"{where}: /{'/'.join(map(str, e.absolute_path))}: {e.message}"
                for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path)))]

    def errors(self, obj, where):
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            return [f"{where}: not a Kubernetes object (apiVersion and kind)"]
        key = f"{obj['apiVersion']}/{obj['kind']}"
        if key not in self.kinds:
            return [f"{where}: no schema for {key} in {os.path.basename(SCHEMAS)}"]
        errs = self._messages(self.kinds[key], obj, f"{where} ({key})")
        if key == "v1/ConfigMap":
            for name, text in (obj.get("data") or {}).items():
                errs += self.config_errors(text, f"{where} data[{name}]")
        return errs

    def config_errors(self, text, where):
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as e:
            return [f"{where}: YAML: {e}"]
        if isinstance(config, dict) and config.get("kind") == "EndpointPickerConfig":
            errs = self._messages(self.configs["EndpointPickerConfig"], config, where)
            defined = {p.get("name") or p.get("type") for p in config.get("plugins", [])}
            for profile in config.get("schedulingProfiles", []):
                for ref in profile.get("plugins", []):
                    if ref.get("pluginRef") not in defined:
                        errs.append(f"{where}: profile {profile.get('name')} refers to "
                                    f"undefined plugin {ref.get('pluginRef')}")
            return errs
        if isinstance(config, dict) and "rules" in config:
            return self._messages(self.configs["PrometheusAdapterConfig"], config, where)
        return []


def load_manifests(repo):
    docs = []
    for path in sorted(glob.glob(os.path.join(repo, "docker", "k8s", "*.yaml"))):
        with open(path) as f:
            for i, obj in enumerate(yaml.safe_load_all(f)):
                if obj is not None:
                    docs.append((f"{os.path.relpath(path, repo)}#{i}", obj))
    return docs


def find(docs, kind, name):
    for _, obj in docs:
        if obj.get("kind") == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind} {name} in docker/k8s")


def flag_values(args):
    """--name=value flags of a container's args -> dict."""
    out = {}
    for a in args:
        m = re.fullmatch(r"--([a-z0-9-]+)=(.*)", a)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def exported_metrics(repo):
    with open(os.path.join(repo, "server", "ops", "server_metrics.cc")) as f:
        return set(re.findall(r'AddFamily\("(gemma_[a-z_]+)"', f.read()))


class SchemaTest(unittest.TestCase):
    def test_every_document_validates(self):
        docs = load_manifests(REPO)
        self.assertGreaterEqual(len(docs), 10)
        errors = [e for where, obj in docs for e in VALIDATOR.errors(obj, where)]
        self.assertEqual(errors, [], "\n".join(errors))
        print(f"validated {len(docs)} documents: "
              + ", ".join(sorted({o['kind'] for _, o in docs})))

    def test_broken_copies_are_rejected(self):
        docs = load_manifests(REPO)
        deployment = find(docs, "Deployment", "gemma-serve")
        pool = find(docs, "InferencePool", "gemma-serve")
        hpa = find(docs, "HorizontalPodAutoscaler", "gemma-serve")
        epp_config = find(docs, "ConfigMap", "gemma-serve-epp")

        def broken(obj, edit):
            obj = copy.deepcopy(obj)
            edit(obj)
            return obj

        container = lambda d: d["spec"]["template"]["spec"]["containers"][0]
        cases = {
            "Deployment without selector": broken(deployment, lambda d: d["spec"].pop("selector")),
            "replicas as a word": broken(deployment, lambda d: d["spec"].update(replicas="two")),
            "misspelt container field": broken(deployment, lambda d: container(d).update(readinesProbe={})),
            "probe without port": broken(deployment, lambda d: container(d)["startupProbe"]["httpGet"].pop("port")),
            "bad quantity": broken(deployment, lambda d: container(d)["resources"]["limits"].update(memory="96 GB")),
            "InferencePool without endpointPickerRef": broken(pool, lambda p: p["spec"].pop("endpointPickerRef")),
            "InferencePool with 9 target ports": broken(
                pool, lambda p: p["spec"].update(targetPorts=[{"number": 8000 + i} for i in range(9)])),
            "HPA target type unknown": broken(
                hpa, lambda h: h["spec"]["metrics"][0]["pods"]["target"].update(type="Average")),
            "EPP profile naming a missing plugin": broken(
                epp_config, lambda c: c["data"].update({"epp-config.yaml": c["data"]["epp-config.yaml"].replace(
                    "pluginRef: max-score-picker", "pluginRef: no-such-picker")})),
            "unknown kind": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}},
        }
        for what, obj in cases.items():
            with self.subTest(what):
                self.assertNotEqual(VALIDATOR.errors(obj, what), [], f"{what} was accepted")


class ConsistencyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_manifests(REPO)
        cls.deployment = find(cls.docs, "Deployment", "gemma-serve")
        cls.pod = cls.deployment["spec"]["template"]["spec"]
        cls.container = cls.pod["containers"][0]
        cls.flags = flag_values(cls.container["args"])
        cls.labels = cls.deployment["spec"]["template"]["metadata"]["labels"]
        cls.ports = {p["name"]: p["containerPort"] for p in cls.container["ports"]}

    def selects_pods(self, selector):
        return all(self.labels.get(k) == v for k, v in selector["matchLabels"].items())

    def test_probes_and_termination_fit_the_load_and_the_drain(self):
        grace_s = float(self.flags["grace-period-s"])
        startup = self.container["startupProbe"]
        self.assertGreaterEqual(startup["periodSeconds"] * startup["failureThreshold"], 15 * 60,
                                "startup probe budget below 15 min for a 62 GB load")
        self.assertEqual(self.container["readinessProbe"]["httpGet"]["path"], "/health")
        self.assertEqual(startup["httpGet"]["path"], "/health")
        self.assertNotEqual(self.container["livenessProbe"].get("httpGet", {}).get("path"), "/health",
                            "a /health liveness probe would kill a draining pod (503)")
        pre_stop = self.container["lifecycle"]["preStop"]["exec"]["command"]
        pre_stop_s = float(pre_stop[-1]) if pre_stop[0].endswith("sleep") else 0
        self.assertGreater(self.pod["terminationGracePeriodSeconds"], pre_stop_s + grace_s)

    def test_one_gpu_per_pod(self):
        resources = self.container["resources"]
        self.assertEqual(str(resources["limits"]["nvidia.com/gpu"]), "1")
        self.assertEqual(str(resources["requests"]["nvidia.com/gpu"]), "1")
        self.assertEqual(self.flags["backend"], "cuda")

    def test_ports_match_the_flags(self):
        self.assertEqual(self.ports["grpc"], int(self.flags["port"]))
        self.assertEqual(self.ports["http"], int(self.flags["http-port"]))
        self.assertEqual(self.ports["metrics"], int(self.flags["metrics-port"]))

    def test_selectors_select_the_pods(self):
        for _, obj in self.docs:
            kind, spec = obj["kind"], obj.get("spec", {})
            if kind == "Service" and obj["metadata"]["name"].startswith("gemma-serve") \
                    and "epp" not in obj["metadata"]["name"]:
                self.assertTrue(all(self.labels.get(k) == v for k, v in spec["selector"].items()))
                for p in spec["ports"]:
                    self.assertIn(p["targetPort"], self.ports)
            elif kind in ("PodDisruptionBudget", "InferencePool", "PodMonitor"):
                self.assertTrue(self.selects_pods(spec["selector"]), f"{kind} selects no gemma-serve pod")

    def test_inference_pool_and_its_endpoint_picker(self):
        pool = find(self.docs, "InferencePool", "gemma-serve")["spec"]
        self.assertEqual([p["number"] for p in pool["targetPorts"]], [self.ports["http"]])
        ref = pool["endpointPickerRef"]
        service = find(self.docs, "Service", ref["name"])
        self.assertIn(ref["port"]["number"], [p["port"] for p in service["spec"]["ports"]])
        epp = find(self.docs, "Deployment", ref["name"])
        epp_flags = flag_values(epp["spec"]["template"]["spec"]["containers"][0]["args"])
        self.assertEqual(epp_flags["pool-name"], find(self.docs, "InferencePool", "gemma-serve")["metadata"]["name"])
        exported = exported_metrics(REPO)
        for flag, name in [("total-queued-requests-metric", "gemma_num_requests_waiting"),
                           ("total-running-requests-metric", "gemma_num_requests_running"),
                           ("kv-cache-usage-percentage-metric", "gemma_kv_cache_usage_perc")]:
            self.assertEqual(epp_flags[flag], name)
            self.assertIn(name, exported, f"gemma-serve exports no {name}")
        self.assertEqual(int(epp_flags["model-server-metrics-port"]), self.ports["metrics"])
        config_map = find(self.docs, "ConfigMap", "gemma-serve-epp")
        mount = epp["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
        config_file = epp_flags["config-file"]
        self.assertEqual(os.path.dirname(config_file), mount)
        self.assertIn(os.path.basename(config_file), config_map["data"])

    def test_autoscaler_reads_an_exported_metric_through_the_adapter(self):
        hpa = find(self.docs, "HorizontalPodAutoscaler", "gemma-serve")["spec"]
        self.assertEqual((hpa["scaleTargetRef"]["kind"], hpa["scaleTargetRef"]["name"]), ("Deployment", "gemma-serve"))
        self.assertLessEqual(hpa["minReplicas"], hpa["maxReplicas"])
        (metric,) = hpa["metrics"]
        self.assertEqual(metric["type"], "Pods")
        name = metric["pods"]["metric"]["name"]
        self.assertEqual(name, "gemma_num_requests_waiting")
        self.assertIn(name, exported_metrics(REPO))
        adapter = yaml.safe_load(find(self.docs, "ConfigMap", "prometheus-adapter-gemma")["data"]["config.yaml"])
        exposed = [r["name"].get("as") or r["name"]["matches"] for r in adapter["rules"]]
        self.assertIn(name, exposed)
        pdb = find(self.docs, "PodDisruptionBudget", "gemma-serve")["spec"]
        self.assertLess(int(pdb.get("maxUnavailable", 1)), hpa["minReplicas"])

    def test_compose_replicas_match_haproxy(self):
        with open(os.path.join(REPO, "docker", "compose.scale.yaml")) as f:
            compose = yaml.safe_load(f)
        with open(os.path.join(REPO, "docker", "haproxy.cfg")) as f:
            haproxy = f.read()
        replicas = {k: v for k, v in compose["services"].items() if k.startswith("gemma-serve-")}
        self.assertGreaterEqual(len(replicas), 2)
        gpus = []
        lb_env = compose["services"]["haproxy"]["environment"]
        for i, (name, svc) in enumerate(sorted(replicas.items())):
            flags = flag_values(svc["command"])
            grace_s = float(re.sub(r"\$\{[A-Z_]+:-([0-9.]+)\}", r"\1", flags["grace-period-s"]))
            self.assertGreater(int(svc["stop_grace_period"].rstrip("s")), grace_s, name)
            (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
            gpus += device["device_ids"]
            self.assertIn("/models:ro", " ".join(svc["volumes"]))
            self.assertEqual(lb_env[f"GEMMA_REPLICA_{i}"], name)
            for backend_port in ("50051", "8000"):
                self.assertIn(f'server r{i} "${{GEMMA_REPLICA_{i}}}:{backend_port}"', haproxy)
        self.assertEqual(len(gpus), len(set(gpus)), "two replicas on one GPU")
        caches = [v for svc in replicas.values() for v in svc["volumes"] if v.endswith("/home/gemma/.cache")]
        self.assertEqual(len(caches), len(set(caches)), "replicas share an autotune cache")
        self.assertEqual(len(re.findall(r"^\s+balance leastconn$", haproxy, re.M)), 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=REPO)
    args, rest = parser.parse_known_args()
    REPO = os.path.abspath(args.repo)
    VALIDATOR = Validator(SCHEMAS)
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
