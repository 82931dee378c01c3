#!/usr/bin/env python3
"""Turns deploy/kubernetes/*.yaml into what podman 4.3 `kube play` can run on one host,
and into the containers the systemd-nspawn stand-in for `kube play` runs.

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

For systemd-nspawn (where podman cannot run), OUT_DIR/nspawn.json holds every container of
the same two pod specs (the DaemonSet's init containers, its daemon, the example app) as
what nspawn needs to run it: its command line (the pod spec's command and args over the
image's ENTRYPOINT and CMD, from deploy/Containerfile), its user, groups and environment,
and one bind mount per volumeMount: a hostPath from its (moved) path, a ConfigMap or a
Secret from a directory of its keys written under OUT_DIR/volumes, an emptyDir from an
empty one there. See nspawn_containers.
"""
import argparse
import base64
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


def image_command(containerfile):
    """The image's ENTRYPOINT and CMD (exec form), as deploy/Containerfile gives them."""
    found = {}
    with open(containerfile, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^(ENTRYPOINT|CMD)\s+(\[.*\])\s*$", line)
            if m:
                found[m.group(1)] = json.loads(m.group(2))
    if "ENTRYPOINT" not in found:
        fail(f"{containerfile}: no ENTRYPOINT in exec form ([\"...\"])")
    return found["ENTRYPOINT"], found.get("CMD", [])


def write_volume(directory, files, mode):
    os.makedirs(directory, exist_ok=True)
    for key, data in files.items():
        path = os.path.join(directory, key)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)


def nspawn_containers(pod_name, spec, image, objects, out_dir, where):
    """The pod's containers as systemd-nspawn runs them: a list of dicts with name, init
    (an init container: run to completion, in order, before the others), args (the
    arguments of the test's nspawn_ct: bind mounts, --user, --groups, --env, --nnp,
    --read-only-root, then -- and the command line) and host_paths (hostPath volumes with
    their type, for the test to create or check before the container starts, as the
    kubelet does).

    Kubernetes' rules: `command` replaces the image's ENTRYPOINT and drops its CMD, `args`
    replaces the CMD; the container's securityContext overrides the pod's runAsUser and
    runAsGroup; supplementalGroups are the pod's. A ConfigMap or Secret volume is a
    directory of its keys (mode defaultMode, 0644 unless given); a mount inside another
    volume's mount (the Secret at /etc/snowflaked/etcd inside the ConfigMap's
    /etc/snowflaked) gets its mount point made in that volume's directory, as the kubelet
    makes it. What the stand-in cannot do is refused with the reason, never skipped."""
    entrypoint, cmd = image
    pod_security = spec.get("securityContext", {})
    volumes = {}
    for volume in spec.get("volumes", []):
        name = volume["name"]
        directory = os.path.join(out_dir, "volumes", pod_name, name)
        if "hostPath" in volume:
            volumes[name] = {"source": volume["hostPath"]["path"],
                             "type": volume["hostPath"].get("type", "")}
        elif "configMap" in volume or "secret" in volume:
            ref = volume.get("configMap") or volume["secret"]
            kind, key = ("ConfigMap", "name") if "configMap" in volume else ("Secret", "secretName")
            if "items" in ref:
                fail(f"{where}: volume {name}: the nspawn stand-in takes every key, not items")
            obj = objects.get((kind, ref[key]))
            if obj is None:
                if ref.get("optional"):
                    continue
                fail(f"{where}: volume {name}: no {kind} {ref[key]}")
            files = {k: v.encode() for k, v in obj.get("data", {}).items()} if kind == "ConfigMap" else {
                **{k: base64.b64decode(v) for k, v in obj.get("data", {}).items()},
                **{k: v.encode() for k, v in obj.get("stringData", {}).items()}}
            write_volume(directory, files, ref.get("defaultMode", 0o644))
            volumes[name] = {"source": directory, "generated": True}
        elif "emptyDir" in volume:
            os.makedirs(directory, exist_ok=True)
            volumes[name] = {"source": directory, "generated": True}
        else:
            fail(f"{where}: volume {name}: the nspawn stand-in has hostPath, configMap, "
                 f"secret and emptyDir volumes only")

    containers = []
    for init, container in ([(True, c) for c in spec.get("initContainers", [])] +
                            [(False, c) for c in spec["containers"]]):
        what = f"{where} container {container['name']}"
        security = container.get("securityContext", {})
        uid = security.get("runAsUser", pod_security.get("runAsUser"))
        gid = security.get("runAsGroup", pod_security.get("runAsGroup"))
        if uid is None or gid is None:
            fail(f"{what}: no runAsUser/runAsGroup (the nspawn stand-in does not read the "
                 f"image's USER)")
        if security.get("runAsNonRoot", pod_security.get("runAsNonRoot")) and uid == 0:
            fail(f"{what}: runAsNonRoot with runAsUser 0")
        groups = pod_security.get("supplementalGroups", [])
        args = []
        mounts = [m for m in container.get("volumeMounts", []) if m["name"] in volumes]
        # Outer mounts first: a mount inside another lands on top of it.
        mounts.sort(key=lambda m: m["mountPath"].rstrip("/").count("/"))
        host_paths = []
        for mount in mounts:
            if "subPath" in mount:
                fail(f"{what}: volumeMount {mount['name']}: the nspawn stand-in has no subPath")
            volume = volumes[mount["name"]]
            path = mount["mountPath"].rstrip("/")
            for outer in mounts:
                outer_path = outer["mountPath"].rstrip("/")
                if path.startswith(outer_path + "/") and volumes[outer["name"]].get("generated"):
                    os.makedirs(os.path.join(volumes[outer["name"]]["source"],
                                             os.path.relpath(path, outer_path)), exist_ok=True)
            if "type" in volume:
                host_paths.append({"path": volume["source"], "type": volume["type"]})
            option = "--bind-ro" if mount.get("readOnly") else "--bind"
            args.append(f"{option}={volume['source']}:{path}")
        args += ["--user", f"{uid}:{gid}", "--groups", ",".join(map(str, groups)) or "-"]
        for env in container.get("env", []):
            if "value" not in env:
                fail(f"{what}: env {env['name']}: the nspawn stand-in takes plain values only")
            args += ["--env", f"{env['name']}={env['value']}"]
        if security.get("allowPrivilegeEscalation") is False:
            args.append("--nnp")
        if security.get("readOnlyRootFilesystem"):
            args.append("--read-only-root")
        if "command" in container:
            argv = container["command"] + container.get("args", [])
        else:
            argv = entrypoint + container.get("args", cmd)
        containers.append({"pod": pod_name, "name": container["name"], "init": init,
                           "args": args + ["--"] + argv, "host_paths": host_paths})
    return containers


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

    # The same two pod specs (hostPaths moved, the ConfigMap pointed at the test's etcd)
    # for the systemd-nspawn stand-in; the image is deploy/Containerfile's.
    image = image_command(os.path.join(args.deploy_dir, os.pardir, "Containerfile"))
    objects = {(d["kind"], d["metadata"]["name"]): d for d in (config_map, secret)}
    containers = (nspawn_containers(pod["metadata"]["name"], spec, image, objects,
                                    args.out_dir, f"{daemon_path} DaemonSet") +
                  nspawn_containers(deployment["metadata"]["name"], app_spec, image, objects,
                                    args.out_dir, f"{app_path} Deployment"))
    with open(os.path.join(args.out_dir, "nspawn.json"), "w", encoding="utf-8") as f:
        json.dump(containers, f, indent=1)


if __name__ == "__main__":
    main()
