#!/usr/bin/env python3
"""Turns deploy/kubernetes/*.yaml into what podman 4.3 `kube play` can run on one host.

podman 4.3 plays Pod and Deployment kinds (and ConfigMaps given with --configmap), not
DaemonSet or Service. So this takes, from the very files users apply:

  * the DaemonSet's pod template, played as a Pod (the same spec, not a second copy);
  * the example Deployment as it is;
  * the ConfigMap and the Secret, with the register's etcd endpoints and the HTTP front's
    port pointed at the test's etcd and a free port (the pods run on the host network
    here: `ports` and the probes are dropped, see adapt_for_podman);

and moves every hostPath under HOST_ROOT, so the test never touches the host's own
/run/snowflaked, /var/lib/snowflaked, /run/lock/snowflaked or /etc/machine-id. The images
must be localhost/snowflaked:VERSION (the convention docs/kubernetes.md states).

  kube_pods.py DEPLOY_DIR OUT_DIR --host-root DIR --version V --etcd URL --http-port N

Writes OUT_DIR/configmap.yaml, OUT_DIR/secret.yaml, OUT_DIR/daemon-pod.yaml, OUT_DIR/app.yaml and
OUT_DIR/facts.json (names, probe, ports, hostPaths: what the test checks against).
"""
import argparse
import json
import os
import re
import sys

import yaml


def fail(message):
    sys.exit(f"kube_pods.py: {message}")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind, path):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        fail(f"{path}: expected exactly one {kind}, found {len(found)}")
    return found[0]


def replace_once(text, pattern, replacement, what):
    new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        fail(f"the ConfigMap's snowflaked.toml: expected one {what} line, found {count}")
    return new


def check_images(spec, version, where):
    expected = f"localhost/snowflaked:{version}"
    for c in spec.get("initContainers", []) + spec["containers"]:
        if c["image"] != expected:
            fail(f"{where}: container {c['name']} uses image {c['image']}, expected "
                 f"{expected} (the image deploy/Containerfile builds for this version)")
        if c.get("imagePullPolicy") not in ("IfNotPresent", "Never"):
            fail(f"{where}: container {c['name']} must not pull (imagePullPolicy "
                 f"IfNotPresent or Never, got {c.get('imagePullPolicy')})")


def move_host_paths(spec, host_root, where):
    moved = {}
    for volume in spec.get("volumes", []):
        host_path = volume.get("hostPath")
        if host_path:
            original = host_path["path"]
            host_path["path"] = os.path.join(host_root, original.lstrip("/"))
            moved[volume["name"]] = {"node": original, "test": host_path["path"],
                                     "type": host_path.get("type", "")}
    if not moved:
        fail(f"{where}: no hostPath volume: pods share the ring through one")
    return moved


def adapt_for_podman(container, port):
    """What podman 4.3 on a host without systemd cannot take, with the reason.

    On the host network (the pods reach the test's etcd on 127.0.0.1) a port is only
    where the process listens, and podman refuses port mappings there: `ports` goes.
    podman runs probes from systemd timers (none here: "unable to get systemd
    connection"), so the probes go too; the test requests the liveness probe's URL itself
    (facts.json says which)."""
    container.pop("ports", None)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        container.pop(probe, None)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("deploy_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--host-root", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--etcd", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    args = parser.parse_args()

    daemon_path = os.path.join(args.deploy_dir, "snowflaked.yaml")
    app_path = os.path.join(args.deploy_dir, "example-app.yaml")
    daemon_docs = load(daemon_path)
    app_docs = load(app_path)

    config_map = one(daemon_docs, "ConfigMap", daemon_path)
    secret = one(daemon_docs, "Secret", daemon_path)
    daemon_set = one(daemon_docs, "DaemonSet", daemon_path)
    service = one(daemon_docs, "Service", daemon_path)
    deployment = one(app_docs, "Deployment", app_path)

    # The DaemonSet's pod template, as a Pod.
    template = daemon_set["spec"]["template"]
    spec = template["spec"]
    check_images(spec, args.version, f"{daemon_path} DaemonSet")
    daemon = next(c for c in spec["containers"] if c["name"] == "snowflaked")
    probe = daemon["livenessProbe"]["httpGet"]
    container_port = {p["name"]: p["containerPort"] for p in daemon.get("ports", [])}
    listen = re.search(r'^listen = \["[^"]*:(\d+)"', config_map["data"]["snowflaked.toml"],
                       flags=re.MULTILINE)
    if not listen:
        fail(f"{daemon_path}: the ConfigMap's snowflaked.toml has no http.listen address")
    front_port = int(listen.group(1))
    for name, value in (("the liveness probe's port", probe["port"]),
                        ("the port named http", container_port.get("http"))):
        if value != front_port:
            fail(f"{daemon_path}: {name} is {value}, but the front listens on {front_port}")
    target = service["spec"]["ports"][0]["targetPort"]
    if target not in container_port and target not in container_port.values():
        fail(f"{daemon_path}: the Service's targetPort {target} names no port of the daemon")
    config_mount = next(m for m in daemon["volumeMounts"] if m["name"] == "config")
    config_arg = daemon["args"][daemon["args"].index("--config") + 1]
    if not config_arg.startswith(config_mount["mountPath"] + "/"):
        fail(f"{daemon_path}: --config {config_arg} is not in the ConfigMap's mount "
             f"{config_mount['mountPath']}")
    moved_daemon = move_host_paths(spec, args.host_root, f"{daemon_path} DaemonSet")
    adapt_for_podman(daemon, args.http_port)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": daemon_set["metadata"]["name"],
            "labels": template["metadata"].get("labels", {}),
            # podman 4.3 removes a "once" init container right after it exits and races
            # its own runtime ("cannot remove container ... as it is running"); "always"
            # keeps it, and it runs at each start of the pod as Kubernetes runs it at
            # each start of a pod.
            "annotations": {"io.podman.annotations.init.container.type": "always"},
        },
        "spec": spec,
    }

    app_spec = deployment["spec"]["template"]["spec"]
    check_images(app_spec, args.version, f"{app_path} Deployment")
    moved_app = move_host_paths(app_spec, args.host_root, f"{app_path} Deployment")
    shared = {v["node"] for v in moved_app.values()} & {v["node"] for v in moved_daemon.values()}
    if not shared:
        fail(f"{app_path}: the Deployment mounts none of the DaemonSet's hostPaths")

    # The ConfigMap, pointed at the test's etcd and port.
    toml = config_map["data"]["snowflaked.toml"]
    toml = replace_once(toml, r"^endpoints = .*$", f'endpoints = ["{args.etcd}"]',
                        "register.etcd.endpoints")
    toml = replace_once(toml, r"^listen = .*$", f'listen = ["127.0.0.1:{args.http_port}"]',
                        "http.listen")
    config_map["data"]["snowflaked.toml"] = toml

    os.makedirs(args.out_dir, exist_ok=True)
    for name, doc in (("configmap.yaml", config_map), ("secret.yaml", secret),
                      ("daemon-pod.yaml", pod),
                      ("app.yaml", deployment)):
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
    facts = {
        "namespace": daemon_set["metadata"].get("namespace", "default"),
        "daemon_pod": pod["metadata"]["name"],
        "daemon_container": daemon["name"],
        "app_deployment": deployment["metadata"]["name"],
        "app_container": app_spec["containers"][0]["name"],
        "app_user": app_spec.get("securityContext", {}).get("runAsUser"),
        "app_groups": app_spec.get("securityContext", {}).get("supplementalGroups", []),
        "daemon_user": daemon.get("securityContext", {}).get("runAsUser"),
        "liveness_path": probe["path"],
        "host_paths": moved_daemon,
        "app_host_paths": moved_app,
        "service_target_port": target,
    }
    with open(os.path.join(args.out_dir, "facts.json"), "w", encoding="utf-8") as f:
        json.dump(facts, f, indent=1)


if __name__ == "__main__":
    main()
