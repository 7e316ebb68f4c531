//! The Helm chart `helm/infinispan-operator` with the real `helm` (built by `make
//! testbed-build`, linked into the testbed's `bin/`) against the testbed's real API server:
//!
//! - `helm lint` for every watch scope, values.schema.json rejecting bad values with clear
//!   messages, the chart's CRDs equal to `cluster-operator crd`, every `CLUSTER_OPERATOR_*`
//!   variable of the Deployment a real flag of `cluster-operator run`;
//! - the ServiceMonitor, PodMonitor and Grafana dashboard rendered with `helm template` (the
//!   Prometheus Operator's CRDs are not on the testbed): selectors and ports that match the
//!   objects they scrape, a dashboard whose queries use only metric names the operators export;
//! - per watch scope (`namespace`, `list` of two namespaces, `all`): `helm install`, the objects
//!   verified (ServiceAccount, bindings in exactly the watched namespaces, the Deployment's
//!   restricted security context, probes and env, its pod admitted under the restricted Pod
//!   Security profile, the label policy), then the RBAC proven sufficient by the operator's pod
//!   itself (the image built here, on the testbed's node, as the chart's ServiceAccount): it
//!   becomes Ready holding the Lease, an `Infinispan` CR in a watched namespace is reconciled,
//!   one in an unwatched namespace is left alone, no request is refused (its log), its metrics
//!   are scraped through the chart's Service; then `helm uninstall` leaves nothing of the
//!   release (the CRDs stay, by Helm's design);
//! - two releases of the same name in two namespaces, label policy on in both, side by side.
//!
//! The clusters' own pods (server and resources operator images left at the chart's defaults)
//! are not pulled here: running them is `in_pods`'s subject.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Cache, Infinispan};
use e2e::cluster_operator::{binary, get};
use e2e::{TestNamespace, Testbed, eventually, install_crds, repo_root, run_dir};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Event, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, Patch, PatchParams,
    PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::RwLock;

/// The chart, relative to the repository root.
const CHART: &str = "helm/infinispan-operator";
/// `helm template` needs a server version to check the chart's kubeVersion against: the oldest
/// the chart supports.
const TEMPLATE_KUBE_VERSION: &str = "1.30.0";
/// How long the operator gets to reconcile a CR, and objects to appear or go.
const WAIT: Duration = Duration::from_secs(60);
/// The operator's pod: scheduled, its image pulled from the testbed's registry, Ready.
const POD_WAIT: Duration = Duration::from_secs(120);
/// The operator's Lease (`cluster_operator::run::LEASE_NAME`).
const LEASE: &str = cluster_operator::run::LEASE_NAME;

/// An operator installed for all namespaces reconciles every `Infinispan` CR of the API server,
/// those of this suite's other tests included: it runs alone (write lock), the tests that
/// check that a CR is left alone share the read lock.
static CLUSTER_WIDE: RwLock<()> = RwLock::const_new(());

// ---------------------------------------------------------------------------------------------
// helm

/// The testbed's helm, or an error saying how to get it.
fn helm_binary() -> anyhow::Result<PathBuf> {
    let path = run_dir().join("bin/helm");
    ensure!(
        path.exists(),
        "helm is missing ({}): build it with `make testbed-build` (e2e/testbed/build.sh tools \
         builds helm into ~/.cache/infinispan-operators/helm-<version>/) and link it into the \
         testbed with `make testbed-up`",
        path.display()
    );
    Ok(path)
}

fn chart() -> PathBuf {
    repo_root().join(CHART)
}

/// What a helm command printed.
#[derive(Debug)]
struct HelmOutput {
    success: bool,
    stdout: String,
    stderr: String,
}

impl HelmOutput {
    /// stdout, or an error with everything helm said.
    fn ok(self, what: &str) -> anyhow::Result<String> {
        ensure!(
            self.success,
            "{what} failed:\n{}\n{}",
            self.stderr,
            self.stdout
        );
        Ok(self.stdout)
    }
}

/// Runs helm with `args`, its configuration and cache under target/e2e-logs/helm (not the
/// user's home), against the testbed when `kubeconfig` is given.
async fn helm(args: &[&str], kubeconfig: Option<&Path>) -> anyhow::Result<HelmOutput> {
    let home = repo_root().join("target/e2e-logs/helm");
    let mut command = tokio::process::Command::new(helm_binary()?);
    command
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(kubeconfig) = kubeconfig {
        command
            .env("KUBECONFIG", kubeconfig)
            .arg("--kubeconfig")
            .arg(kubeconfig);
    }
    let output = command
        .output()
        .await
        .with_context(|| format!("running helm {}", args.join(" ")))?;
    Ok(HelmOutput {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The documents of a multi-document YAML text (empty ones dropped).
fn documents(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(yaml).context("the output is not valid YAML")?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// `helm template` of the chart as release `release` in `namespace` with `values` (helm
/// arguments such as `--set`).
async fn template(release: &str, namespace: &str, values: &[&str]) -> anyhow::Result<Vec<Value>> {
    let chart = chart();
    let mut args = vec![
        "template",
        release,
        chart.to_str().context("chart path")?,
        "--namespace",
        namespace,
        "--kube-version",
        TEMPLATE_KUBE_VERSION,
    ];
    args.extend(values);
    documents(&helm(&args, None).await?.ok("helm template")?)
}

/// The rendered object of `kind` named `name` (any name when `None`).
fn find<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> anyhow::Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n))
        .with_context(|| format!("no {kind} {name:?} rendered"))
}

/// Whether `actual` holds everything of `expected` (objects: every key of `expected`, recursively;
/// arrays: the same length, element by element), so that fields the API server defaults do not
/// count.
fn json_subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => expected
            .iter()
            .all(|(k, v)| actual.get(k).is_some_and(|a| json_subset(v, a))),
        (Value::Array(expected), Value::Array(actual)) => {
            expected.len() == actual.len()
                && expected.iter().zip(actual).all(|(e, a)| json_subset(e, a))
        }
        _ => expected == actual,
    }
}

/// Whether every entry of `subset` (a JSON object of strings) is in `of`.
fn contains_all(of: &Value, subset: &Value) -> bool {
    subset
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| of.get(k) == Some(v)))
}

// ---------------------------------------------------------------------------------------------
// Static checks

#[tokio::test]
async fn lint_passes_for_every_scope_and_the_schema_rejects_bad_values() -> anyhow::Result<()> {
    let chart = chart();
    let chart = chart.to_str().context("chart path")?;
    for values in [
        vec![],
        vec!["--set", "watch.scope=namespace"],
        vec![
            "--set",
            "watch.scope=list",
            "--set-json",
            r#"watch.namespaces=["a","b"]"#,
        ],
        vec!["--set", "watch.scope=all"],
        vec![
            "--set",
            "operator.enabled=false",
            "--set",
            "serviceAccount.name=my-operator",
        ],
        vec![
            "--set",
            "replicas=3",
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "metrics.podMonitor.enabled=true",
            "--set",
            "metrics.grafanaDashboard.enabled=true",
            "--set",
            "server.fsGroup=none",
            "--set",
            "tmpSizeLimit=2Gi",
            "--set-json",
            r#"managedImagePullSecrets=["pull"]"#,
        ],
    ] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend(&values);
        let out = helm(&args, None).await?;
        ensure!(
            out.success && out.stdout.contains("0 chart(s) failed"),
            "helm lint {values:?} failed:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }

    // (values, what helm must say)
    let refused: [(&[&str], &[&str]); 7] = [
        (
            &["--set", "watch.scope=bogus"],
            &["/watch/scope", "'namespace', 'list', 'all'"],
        ),
        (
            &["--set", "watchScope=all"],
            &["additional properties 'watchScope' not allowed"],
        ),
        (
            &["--set", "watch.scope=list"],
            &["/watch/namespaces", "minItems"],
        ),
        (
            &[
                "--set",
                "watch.scope=list",
                "--set-json",
                r#"watch.namespaces=["Not_A_Name"]"#,
            ],
            &["/watch/namespaces/0"],
        ),
        (&["--set", "drainTimeout=soon"], &["/drainTimeout"]),
        (
            &["--set", "logFormat=xml"],
            &["/logFormat", "'text', 'json'"],
        ),
        (
            &[
                "--set",
                "replicas=2",
                "--set",
                "leaderElection.enabled=false",
            ],
            &["replicas > 1 needs leaderElection.enabled: true"],
        ),
    ];
    for (values, messages) in refused {
        let mut args = vec![
            "template",
            "refused",
            chart,
            "--kube-version",
            TEMPLATE_KUBE_VERSION,
        ];
        args.extend(values);
        let out = helm(&args, None).await?;
        ensure!(!out.success, "helm accepted {values:?}:\n{}", out.stdout);
        for message in messages {
            ensure!(
                out.stderr.contains(message),
                "helm refused {values:?} without saying {message:?}:\n{}",
                out.stderr
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_chart_crds_are_the_generated_ones() -> anyhow::Result<()> {
    let output = std::process::Command::new(binary()?)
        .arg("crd")
        .output()
        .context("running cluster-operator crd")?;
    ensure!(output.status.success(), "cluster-operator crd failed");
    let generated = String::from_utf8(output.stdout)?;
    let path = chart().join("crds/infinispan.org.yaml");
    let committed = std::fs::read_to_string(&path)?;
    ensure!(
        committed == generated,
        "{} differs from `cluster-operator crd`: run `make crds`",
        path.display()
    );
    Ok(())
}

#[tokio::test]
async fn every_environment_variable_of_the_deployment_is_a_flag_of_run() -> anyhow::Result<()> {
    let objects = template(
        "flags",
        "ops",
        &[
            "--set-json",
            r#"managedImagePullSecrets=["pull-a","pull-b"]"#,
            "--set",
            "server.fsGroup=none",
        ],
    )
    .await?;
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment", None)?.clone())?;
    let container = operator_container(&deployment)?;
    let help = std::process::Command::new(binary()?)
        .args(["run", "--help"])
        .output()
        .context("running cluster-operator run --help")?;
    let help = String::from_utf8(help.stdout)?;
    let mut names = Vec::new();
    for var in container.env.iter().flatten() {
        if var.name.starts_with("CLUSTER_OPERATOR_") {
            ensure!(
                help.contains(&format!("env: {}", var.name)),
                "the Deployment sets {}, which `cluster-operator run --help` does not list: the \
                 operator would ignore it",
                var.name
            );
            names.push(var.name.as_str());
        }
    }
    let env = env_values(container);
    ensure!(
        env.get("CLUSTER_OPERATOR_IMAGE_PULL_SECRETS")
            .map(String::as_str)
            == Some("pull-a,pull-b")
    );
    ensure!(
        env.get("CLUSTER_OPERATOR_SERVER_FS_GROUP")
            .map(String::as_str)
            == Some("none")
    );
    ensure!(names.len() >= 15, "only {names:?}");
    // The operator keeps the release's shared label policy binding.
    ensure!(
        env.get("CLUSTER_OPERATOR_SHARED_LABEL_POLICY_BINDING")
            .map(String::as_str)
            == Some("flags-infinispan-operator-shared-cluster-label.ops")
    );

    // Without the chart's label policy, the operator tries to apply it itself (and warns when
    // it may not).
    let objects = template("flags", "ops", &["--set", "labelPolicy.enabled=false"]).await?;
    ensure!(find(&objects, "ValidatingAdmissionPolicy", None).is_err());
    ensure!(find(&objects, "ValidatingAdmissionPolicyBinding", None).is_err());
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment", None)?.clone())?;
    let env = env_values(operator_container(&deployment)?);
    ensure!(env.get("CLUSTER_OPERATOR_LABEL_POLICY").map(String::as_str) == Some("operator"));
    // And scopes the binding it applies (the flag's default).
    ensure!(!env.contains_key("CLUSTER_OPERATOR_SHARED_LABEL_POLICY_BINDING"));
    Ok(())
}

/// Metric names the operators register (read from their sources, tests excluded): the
/// operator-runtime ones under both prefixes, histograms with their `_bucket`, `_sum` and
/// `_count` series.
fn exported_metric_names() -> anyhow::Result<BTreeSet<String>> {
    const CLUSTER: &str = "infinispan_cluster_operator";
    const RESOURCES: &str = "infinispan_resources_operator";
    let mut names = BTreeSet::new();
    for (dir, prefixes) in [
        ("operator-runtime/src", &[CLUSTER, RESOURCES][..]),
        ("cluster-operator/src", &[CLUSTER][..]),
        ("resources-operator/src", &[RESOURCES][..]),
    ] {
        let mut files = vec![repo_root().join(dir)];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path)? {
                    files.push(entry?.path());
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            // prometheus' constructors, and the resources operator's registration helpers
            // (`metrics.rs`: `counter(registry, "name", ...)`, whose name is the second
            // argument).
            for (constructor, skip_first) in [
                ("Opts::new(", false),
                ("IntGauge::new(", false),
                ("IntCounter::new(", false),
                ("Gauge::new(", false),
                ("Counter::new(", false),
                (" counter(", true),
                (" gauge(", true),
                (" histogram(", true),
            ] {
                for (at, _) in text.match_indices(constructor) {
                    let mut rest = &text[at + constructor.len()..];
                    if skip_first {
                        rest = rest.split_once(',').map(|(_, r)| r).unwrap_or_default();
                    }
                    let Some(literal) = rest.trim_start().strip_prefix('"') else {
                        continue;
                    };
                    let name = literal.split('"').next().unwrap_or_default();
                    let histogram =
                        text[..at].ends_with("Histogram") || constructor == " histogram(";
                    for prefix in prefixes {
                        let full = format!("{prefix}_{name}");
                        if histogram {
                            for suffix in ["_bucket", "_sum", "_count"] {
                                names.insert(format!("{full}{suffix}"));
                            }
                        }
                        names.insert(full);
                    }
                }
            }
        }
    }
    // The scan must see what is known to be there.
    for known in [
        "infinispan_cluster_operator_leader",
        "infinispan_resources_operator_reconciles_total",
        "infinispan_resources_operator_reconcile_duration_seconds_bucket",
    ] {
        ensure!(
            names.contains(known),
            "the source scan missed {known}: {names:?}"
        );
    }
    Ok(names)
}

/// Every `infinispan_*` metric name in the dashboard's queries and variables.
fn dashboard_metric_names(dashboard: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, out: &mut BTreeSet<String>) {
        match value {
            Value::String(text) => {
                let mut rest = text.as_str();
                while let Some(at) = rest.find("infinispan_") {
                    let tail = &rest[at..];
                    let end = tail
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(tail.len());
                    let name = &tail[..end];
                    // infinispan_org_cluster is a label (the PodMonitor's podTargetLabels).
                    if name != "infinispan_org_cluster" {
                        out.insert(name.to_string());
                    }
                    rest = &tail[end..];
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            walk(&target["expr"], &mut names);
        }
    }
    walk(&dashboard["templating"], &mut names);
    names
}

/// The dashboard as the chart ships it.
fn dashboard() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(chart().join("files/grafana-dashboard.json"))?;
    serde_json::from_str(&text).context("files/grafana-dashboard.json is not JSON")
}

#[tokio::test]
async fn service_monitor_pod_monitor_and_dashboard_render_and_match() -> anyhow::Result<()> {
    let monitors = [
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prometheus",
        "--set",
        "metrics.podMonitor.enabled=true",
        "--set",
        "metrics.grafanaDashboard.enabled=true",
        "--set",
        "metrics.grafanaDashboard.namespace=grafana",
    ];
    let mut values = vec![
        "--set",
        "watch.scope=list",
        "--set-json",
        r#"watch.namespaces=["a","b"]"#,
    ];
    values.extend(monitors);
    let objects = template("mon", "ops", &values).await?;

    // The ServiceMonitor scrapes the metrics Service, which selects the operator's pod and
    // targets its metrics port.
    let service = find(&objects, "Service", Some("mon-infinispan-operator-metrics"))?;
    let deployment = find(&objects, "Deployment", None)?;
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    ensure!(contains_all(pod_labels, &service["spec"]["selector"]));
    let port = &service["spec"]["ports"][0];
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    ensure!(
        container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == port["targetPort"] && p["containerPort"] == 8080),
        "the Service targets {} which is no container port: {container}",
        port["targetPort"]
    );
    let monitor = find(&objects, "ServiceMonitor", None)?;
    ensure!(monitor["apiVersion"] == "monitoring.coreos.com/v1");
    ensure!(monitor["metadata"]["labels"]["release"] == "prometheus");
    ensure!(
        contains_all(
            &service["metadata"]["labels"],
            &monitor["spec"]["selector"]["matchLabels"]
        ),
        "the ServiceMonitor's selector {} does not select the Service {}",
        monitor["spec"]["selector"],
        service["metadata"]["labels"]
    );
    ensure!(monitor["spec"]["namespaceSelector"]["matchNames"] == json!(["ops"]));
    let endpoint = &monitor["spec"]["endpoints"][0];
    ensure!(endpoint["port"] == port["name"] && endpoint["path"] == "/metrics");

    // The PodMonitor selects the resources operators' pods the cluster operator creates.
    let pod_monitor = find(&objects, "PodMonitor", None)?;
    ensure!(pod_monitor["apiVersion"] == "monitoring.coreos.com/v1");
    let resources_pod_labels = serde_json::to_value(
        cluster_operator::build::resources_operator::labels("some-cluster"),
    )?;
    ensure!(
        contains_all(
            &resources_pod_labels,
            &pod_monitor["spec"]["selector"]["matchLabels"]
        ),
        "the PodMonitor's selector {} does not select a resources operator's pod {}",
        pod_monitor["spec"]["selector"],
        resources_pod_labels
    );
    ensure!(pod_monitor["spec"]["namespaceSelector"]["matchNames"] == json!(["a", "b"]));
    ensure!(
        pod_monitor["spec"]["podMetricsEndpoints"][0]["port"]
            == cluster_operator::build::resources_operator::METRICS_PORT_NAME
    );
    ensure!(pod_monitor["spec"]["podTargetLabels"] == json!([CLUSTER_LABEL]));

    // For all namespaces the PodMonitor looks everywhere.
    let mut all = vec!["--set", "watch.scope=all"];
    all.extend(monitors);
    let objects_all = template("mon", "ops", &all).await?;
    let pod_monitor = find(&objects_all, "PodMonitor", None)?;
    ensure!(pod_monitor["spec"]["namespaceSelector"] == json!({ "any": true }));

    // The dashboard ConfigMap holds the dashboard file, for Grafana's sidecar.
    let config_map = find(
        &objects,
        "ConfigMap",
        Some("mon-infinispan-operator-dashboard"),
    )?;
    ensure!(config_map["metadata"]["namespace"] == "grafana");
    ensure!(config_map["metadata"]["labels"]["grafana_dashboard"] == "1");
    let data = config_map["data"]["infinispan-operators.json"]
        .as_str()
        .context("no dashboard in the ConfigMap")?;
    let rendered: Value =
        serde_json::from_str(data).context("the dashboard in the ConfigMap is not JSON")?;
    ensure!(rendered == dashboard()?);
    let servers = config_map["data"]["infinispan-servers.json"]
        .as_str()
        .context("no servers' dashboard in the ConfigMap")?;
    let servers: Value = serde_json::from_str(servers)
        .context("the servers' dashboard in the ConfigMap is not JSON")?;
    ensure!(servers == servers_dashboard()?);

    // Without the options, none of them.
    let plain = template("mon", "ops", &[]).await?;
    for kind in ["ServiceMonitor", "PodMonitor", "ConfigMap"] {
        ensure!(
            find(&plain, kind, None).is_err(),
            "{kind} rendered by default"
        );
    }
    Ok(())
}

/// The servers' dashboard as the chart ships it.
fn servers_dashboard() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(chart().join("files/grafana-dashboard-servers.json"))?;
    serde_json::from_str(&text).context("files/grafana-dashboard-servers.json is not JSON")
}

/// The servers' dashboard queries only metrics a real 16.0.7 server exports (the committed list
/// of one scrape, `e2e/testdata/server-metrics-16.0.7.txt`; `server_metrics.rs` checks against a
/// live scrape), and Prometheus' own `up`; every panel has a query; ids are unique.
#[test]
fn the_servers_dashboard_queries_only_metrics_the_servers_export() -> anyhow::Result<()> {
    let dashboard = servers_dashboard()?;
    ensure!(dashboard["uid"] == "infinispan-servers");
    let exported: BTreeSet<String> =
        std::fs::read_to_string(e2e::repo_root().join("e2e/testdata/server-metrics-16.0.7.txt"))?
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(str::to_string)
            .chain(["up".to_string()])
            .collect();
    let used = e2e::scrape::dashboard_metric_names(&dashboard);
    for expected in ["infinispan_cluster_size", "jvm_memory_used_bytes", "up"] {
        ensure!(
            used.contains(expected),
            "the scan missed {expected}: {used:?}"
        );
    }
    let unknown: Vec<&String> = used.difference(&exported).collect();
    ensure!(
        unknown.is_empty(),
        "the servers' dashboard queries metrics a 16.0.7 server does not export: {unknown:?}"
    );
    let panels = dashboard["panels"].as_array().context("no panels")?;
    let mut ids = BTreeSet::new();
    for panel in panels {
        ensure!(
            ids.insert(panel["id"].to_string()),
            "duplicate panel id {}",
            panel["id"]
        );
        if panel["type"] != "row" {
            ensure!(
                panel["targets"].as_array().is_some_and(|t| !t.is_empty()),
                "panel {} has no query",
                panel["title"]
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_dashboard_queries_only_metrics_the_operators_export() -> anyhow::Result<()> {
    let dashboard = dashboard()?;
    ensure!(dashboard["uid"] == "infinispan-operators");
    let used = dashboard_metric_names(&dashboard);
    let exported = exported_metric_names()?;
    let unknown: Vec<&String> = used.difference(&exported).collect();
    ensure!(
        unknown.is_empty(),
        "the dashboard queries metrics nobody exports: {unknown:?} (exported: {exported:?})"
    );
    // Both operators are on it.
    ensure!(
        used.iter()
            .any(|n| n.starts_with("infinispan_cluster_operator_"))
    );
    ensure!(
        used.iter()
            .any(|n| n.starts_with("infinispan_resources_operator_"))
    );
    let panels = dashboard["panels"].as_array().context("no panels")?;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        ensure!(
            panel["targets"].as_array().is_some_and(|t| !t.is_empty()),
            "panel {} has no query",
            panel["title"]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Installs on the testbed

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Namespace,
    List,
    All,
}

/// Whether the ServiceAccount `namespace/account` may `verb` `resource` (in `in_namespace`, or
/// cluster-wide).
async fn may(
    admin: &Client,
    namespace: &str,
    account: &str,
    verb: &str,
    (group, resource): (&str, &str),
    in_namespace: Option<&str>,
) -> anyhow::Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_string(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: in_namespace.map(str::to_string),
                group: Some(group.to_string()),
                resource: Some(resource.to_string()),
                verb: Some(verb.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

fn operator_container(deployment: &Deployment) -> anyhow::Result<&Container> {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .context("the Deployment has no container")
}

/// The plain `value`s of the container's environment.
fn env_values(container: &Container) -> BTreeMap<String, String> {
    container
        .env
        .iter()
        .flatten()
        .filter_map(|v| Some((v.name.clone(), v.value.clone()?)))
        .collect()
}

/// Checks the operator's Deployment: restricted security context, probes, metrics port, the
/// downward-API variables, /tmp, and the watch scope and Lease namespace in its env.
fn check_deployment(
    deployment: &Deployment,
    release_ns: &str,
    watch_env: &str,
) -> anyhow::Result<()> {
    let spec = &deployment.spec;
    let pod = spec.template.spec.as_ref().context("no pod spec")?;
    let pod_security = pod
        .security_context
        .as_ref()
        .context("no pod securityContext")?;
    ensure!(pod_security.run_as_non_root == Some(true));
    ensure!(
        pod_security
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.as_str())
            == Some("RuntimeDefault")
    );
    let container = operator_container(deployment)?;
    let security = container
        .security_context
        .as_ref()
        .context("no container securityContext")?;
    ensure!(security.allow_privilege_escalation == Some(false));
    ensure!(security.read_only_root_filesystem == Some(true));
    ensure!(
        security.capabilities.as_ref().and_then(|c| c.drop.clone())
            == Some(vec!["ALL".to_string()])
    );
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .context("no container port named metrics")?;
    ensure!(port.container_port == 8080);
    for (probe, path) in [
        (&container.liveness_probe, "/healthz"),
        (&container.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .with_context(|| format!("no httpGet probe on {path}"))?;
        ensure!(get.path.as_deref() == Some(path));
        ensure!(
            serde_json::to_value(&get.port)? == json!("metrics"),
            "probe {path} on {:?}",
            get.port
        );
    }
    let env = env_values(container);
    ensure!(
        env.get("CLUSTER_OPERATOR_WATCH_NAMESPACES")
            .map(String::as_str)
            == Some(watch_env),
        "watch namespaces {:?}, expected {watch_env:?}",
        env.get("CLUSTER_OPERATOR_WATCH_NAMESPACES")
    );
    ensure!(
        env.get("CLUSTER_OPERATOR_LEADER_ELECTION")
            .map(String::as_str)
            == Some("true")
    );
    ensure!(
        env.get("CLUSTER_OPERATOR_LEASE_NAMESPACE")
            .map(String::as_str)
            == Some(release_ns)
    );
    ensure!(env.get("CLUSTER_OPERATOR_ARCHIVE_DIR").map(String::as_str) == Some("/tmp"));
    ensure!(env.get("CLUSTER_OPERATOR_LABEL_POLICY").map(String::as_str) == Some("external"));
    let field_refs: BTreeMap<&str, &str> = container
        .env
        .iter()
        .flatten()
        .filter_map(|v| {
            let path = v
                .value_from
                .as_ref()?
                .field_ref
                .as_ref()?
                .field_path
                .as_str();
            Some((v.name.as_str(), path))
        })
        .collect();
    ensure!(
        field_refs
            == BTreeMap::from([
                ("POD_NAME", "metadata.name"),
                ("POD_NAMESPACE", "metadata.namespace")
            ]),
        "{field_refs:?}"
    );
    let tmp = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/tmp")
        .context("nothing mounted at /tmp")?;
    ensure!(
        pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == tmp.name && v.empty_dir.is_some()),
        "/tmp is not an emptyDir"
    );
    Ok(())
}

/// The objects of a release: (apiVersion, kind, namespace, name) from `helm get manifest`.
async fn release_objects(
    release: &str,
    namespace: &str,
    kubeconfig: &Path,
) -> anyhow::Result<Vec<(String, String, Option<String>, String)>> {
    let manifest = helm(
        &["get", "manifest", release, "--namespace", namespace],
        Some(kubeconfig),
    )
    .await?
    .ok("helm get manifest")?;
    documents(&manifest)?
        .iter()
        .map(|o| {
            Ok((
                o["apiVersion"].as_str().context("apiVersion")?.to_string(),
                o["kind"].as_str().context("kind")?.to_string(),
                o["metadata"]["namespace"].as_str().map(str::to_string),
                o["metadata"]["name"].as_str().context("name")?.to_string(),
            ))
        })
        .collect()
}

/// `helm uninstall`, then: every object of the manifest gone, nothing labelled with the
/// release left anywhere (namespaced or cluster-scoped), the release's record gone; the CRDs
/// stay.
async fn uninstall_and_check_clean(
    admin: &Client,
    release: &str,
    namespace: &str,
    kubeconfig: &Path,
) -> anyhow::Result<()> {
    let objects = release_objects(release, namespace, kubeconfig).await?;
    helm(
        &[
            "uninstall",
            release,
            "--namespace",
            namespace,
            "--wait=false",
        ],
        Some(kubeconfig),
    )
    .await?
    .ok("helm uninstall")?;
    for (api_version, kind, object_ns, name) in &objects {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(admin, &gvk).await?;
        let api: Api<DynamicObject> = match capabilities.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(
                admin.clone(),
                object_ns.as_deref().unwrap_or(namespace),
                &resource,
            ),
            kube::discovery::Scope::Cluster => Api::all_with(admin.clone(), &resource),
        };
        let api = &api;
        eventually(
            &format!("{kind} {name} of release {release} is gone"),
            WAIT,
            || async move { Ok(api.get_opt(name).await?.is_none().then_some(())) },
        )
        .await?;
    }
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"));
    macro_rules! none_left {
        ($kind:ty) => {
            // Another release of the same name lives in another namespace: the release's
            // objects are those in its namespace and those named `<...>.<its namespace>`.
            let suffix = format!(".{namespace}");
            let left: Vec<$kind> = Api::<$kind>::all(admin.clone())
                .list(&selector)
                .await?
                .items
                .into_iter()
                .filter(|o| {
                    o.namespace().as_deref() == Some(namespace) || o.name_any().ends_with(&suffix)
                })
                .collect();
            ensure!(
                left.is_empty(),
                "{} of release {release} left: {:?}",
                stringify!($kind),
                left.iter().map(|o| o.name_any()).collect::<Vec<_>>()
            );
        };
    }
    none_left!(ClusterRole);
    none_left!(ClusterRoleBinding);
    none_left!(ValidatingAdmissionPolicy);
    none_left!(ValidatingAdmissionPolicyBinding);
    none_left!(Role);
    none_left!(RoleBinding);
    none_left!(ServiceAccount);
    none_left!(Deployment);
    none_left!(Service);
    let records = Api::<Secret>::namespaced(admin.clone(), namespace)
        .list(&ListParams::default().labels(&format!("owner=helm,name={release}")))
        .await?
        .items;
    ensure!(
        records.is_empty(),
        "helm's release record of {release} is left"
    );
    // Helm never deletes the CRDs of crds/.
    ensure!(
        Api::<CustomResourceDefinition>::all(admin.clone())
            .get_opt("infinispans.infinispan.org")
            .await?
            .is_some(),
        "the Infinispan CRD went with the release"
    );
    Ok(())
}

/// Applies a one-replica `Infinispan` CR `namespace/name` as the admin.
async fn apply_cluster(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let cr: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
        "metadata": { "name": name, "namespace": namespace },
        "spec": { "replicas": 1 },
    }))?;
    Api::<Infinispan>::namespaced(admin.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cr),
        )
        .await
        .with_context(|| format!("creating the Infinispan CR {namespace}/{name}"))?;
    Ok(())
}

/// Waits until the operator reconciled `namespace/name`: status of the current generation with
/// its conditions, the server's StatefulSet, the operators' credentials, the resources
/// operator's Role (which the API server grants only if the operator holds every rule of it)
/// and Deployment.
async fn wait_reconciled(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Deployment> {
    eventually(
        &format!("the cluster operator reconciled {namespace}/{name}"),
        WAIT,
        || async move {
            let cr = Api::<Infinispan>::namespaced(admin.clone(), namespace)
                .get(name)
                .await?;
            let status_current =
                cr.status.as_ref().and_then(|s| s.observed_generation) == cr.metadata.generation;
            let conditions: BTreeSet<&str> = cr
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().map(|c| c.type_.as_str()))
                .collect();
            if !(status_current
                && conditions.contains("Ready")
                && conditions.contains("ResourcesOperatorReady"))
            {
                return Ok(None);
            }
            let objects = (
                get::<StatefulSet>(admin, namespace, name).await?,
                get::<Secret>(admin, namespace, &format!("{name}-operator-credentials")).await?,
                get::<Role>(admin, namespace, &format!("resources-operator-{name}")).await?,
                get::<Deployment>(admin, namespace, &format!("resources-operator-{name}")).await?,
            );
            Ok(match objects {
                (Some(_), Some(_), Some(_), Some(deployment)) => Some(deployment),
                _ => None,
            })
        },
    )
    .await
}

/// Checks that nothing touched the CR `namespace/name`: no status, no finalizer, no
/// StatefulSet.
async fn check_left_alone(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let cr = Api::<Infinispan>::namespaced(admin.clone(), namespace)
        .get(name)
        .await?;
    ensure!(
        cr.status.is_none() && cr.finalizers().is_empty(),
        "the CR {namespace}/{name} in an unwatched namespace was reconciled: {:?} {:?}",
        cr.status,
        cr.finalizers()
    );
    ensure!(
        get::<StatefulSet>(admin, namespace, name).await?.is_none(),
        "a StatefulSet appeared for {namespace}/{name} in an unwatched namespace"
    );
    Ok(())
}

/// Removes the finalizers of the Infinispan CRs in `namespace` (the stopped operator's) and
/// deletes them.
async fn remove_clusters(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    let api = Api::<Infinispan>::namespaced(admin.clone(), namespace);
    for cr in api.list(&ListParams::default()).await?.items {
        let _ = api
            .patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
            )
            .await;
        let _ = api.delete(&cr.name_any(), &DeleteParams::default()).await;
    }
    Ok(())
}

/// Lines of the operator's log where the API server refused it something.
fn refusals(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("system:serviceaccount:") && l.contains("cannot "))
        .collect()
}

/// Names of the metric families on a /metrics page.
fn metric_names(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// One watch scope, end to end.
async fn install_run_uninstall(scope: Scope) -> anyhow::Result<()> {
    let _lock = match scope {
        Scope::All => (None, Some(CLUSTER_WIDE.write().await)),
        _ => (Some(CLUSTER_WIDE.read().await), None),
    };
    let testbed = Testbed::get()?;
    helm_binary()?;
    let admin = testbed.admin_client().await?;
    install_crds(&admin).await?;
    let prefix = match scope {
        Scope::Namespace => "helm-ns",
        Scope::List => "helm-list",
        Scope::All => "helm-all",
    };
    let release_ns = TestNamespace::create(&admin, prefix).await?;
    let other_a = TestNamespace::create(&admin, prefix).await?;
    let other_b = TestNamespace::create(&admin, prefix).await?;
    let r = release_ns.name.as_str();
    let release = format!("{prefix}-{}", &r[r.len() - 8..]);
    let fullname = format!("{release}-infinispan-operator");
    let qualified = format!("{fullname}.{r}");

    // (values, watched namespaces, watched and unwatched namespaces that get a CR)
    let (values, watched, with_cr, unwatched): (Vec<String>, Vec<&str>, Vec<&str>, Vec<&str>) =
        match scope {
            Scope::Namespace => (vec![], vec![r], vec![r], vec![&other_a.name]),
            Scope::List => (
                vec![
                    "--set".into(),
                    "watch.scope=list".into(),
                    "--set-json".into(),
                    format!(
                        r#"watch.namespaces=["{}","{}"]"#,
                        other_a.name, other_b.name
                    ),
                ],
                vec![&other_a.name, &other_b.name],
                vec![&other_a.name, &other_b.name],
                // The release namespace is not watched unless listed.
                vec![r],
            ),
            Scope::All => (
                vec!["--set".into(), "watch.scope=all".into()],
                vec![],
                vec![&other_a.name],
                vec![],
            ),
        };
    let watch_env = match scope {
        Scope::All => "*".to_string(),
        _ => watched.join(","),
    };

    // The operator's image built here (`make images`); the servers' and the resources
    // operator's stay the chart's defaults, which the node cannot pull: this suite's subject is
    // the chart and the operator's rights, the pods of a cluster are `in_pods`'s.
    let images = e2e::pods::Images::get(&testbed)?;
    let (repository, tag) = e2e::pods::split_reference(&images.cluster_operator)?;
    let (repository, tag) = (
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
    );
    let chart = chart();
    let mut args: Vec<&str> = vec![
        "install",
        &release,
        chart.to_str().context("chart path")?,
        "--namespace",
        r,
        "--wait=false",
        "--set",
        &repository,
        "--set",
        &tag,
    ];
    args.extend(values.iter().map(String::as_str));
    let installed = helm(&args, Some(&testbed.kubeconfig))
        .await?
        .ok("helm install")?;
    ensure!(installed.contains("STATUS: deployed"), "{installed}");
    ensure!(
        installed.contains(&format!(
            "Watch scope: {}",
            match scope {
                Scope::Namespace => "namespace",
                Scope::List => "list",
                Scope::All => "all",
            }
        )),
        "the NOTES do not say the watch scope:\n{installed}"
    );

    // The objects.
    ensure!(
        get::<ServiceAccount>(&admin, r, &fullname).await?.is_some(),
        "no ServiceAccount"
    );
    let cluster_role = Api::<ClusterRole>::all(admin.clone())
        .get(&qualified)
        .await?;
    ensure!(
        serde_json::to_value(&cluster_role.rules)?
            == serde_json::to_value(cluster_operator::rbac::rules())?,
        "the ClusterRole's rules are not cluster_operator::rbac::rules()"
    );
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"));
    let bindings: BTreeSet<(String, String, String, String)> =
        Api::<RoleBinding>::all(admin.clone())
            .list(&selector)
            .await?
            .items
            .iter()
            .map(|b| {
                (
                    b.namespace().unwrap_or_default(),
                    b.name_any(),
                    b.role_ref.kind.clone(),
                    b.role_ref.name.clone(),
                )
            })
            .collect();
    let mut expected: BTreeSet<(String, String, String, String)> = watched
        .iter()
        .map(|ns| {
            (
                ns.to_string(),
                qualified.clone(),
                "ClusterRole".into(),
                qualified.clone(),
            )
        })
        .collect();
    let lease_role = format!("{fullname}-leader-election");
    expected.insert((
        r.into(),
        lease_role.clone(),
        "Role".into(),
        lease_role.clone(),
    ));
    ensure!(
        bindings == expected,
        "RoleBindings {bindings:#?}, expected {expected:#?}"
    );
    // The shared label policy's binding scope: patch of that binding and get of its
    // parameter, each by name, whatever the watch scope.
    let scope_name = format!("{fullname}-shared-cluster-label-scope.{r}");
    let (scope_bindings, cluster_bindings): (Vec<_>, Vec<_>) =
        Api::<ClusterRoleBinding>::all(admin.clone())
            .list(&selector)
            .await?
            .items
            .into_iter()
            .partition(|b| b.name_any() == scope_name);
    ensure!(
        scope_bindings.len() == 1
            && scope_bindings[0].role_ref.name == scope_name
            && scope_bindings[0]
                .subjects
                .iter()
                .flatten()
                .map(|s| (s.name.as_str(), s.namespace.as_deref()))
                .eq([(fullname.as_str(), Some(r))]),
        "the binding scope's ClusterRoleBinding: {scope_bindings:?}"
    );
    let scope_rules = serde_json::to_value(
        Api::<ClusterRole>::all(admin.clone())
            .get(&scope_name)
            .await?
            .rules,
    )?;
    ensure!(
        scope_rules
            == json!([
                {"apiGroups": ["admissionregistration.k8s.io"],
                 "resources": ["validatingadmissionpolicybindings"],
                 "resourceNames": [format!("{fullname}-shared-cluster-label.{r}")],
                 "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["configmaps"],
                 "resourceNames": [common_crds::shared::SHARED_NAME], "verbs": ["get"]},
            ]),
        "the binding scope's rules: {scope_rules}"
    );
    match scope {
        Scope::All => {
            ensure!(cluster_bindings.len() == 1, "{cluster_bindings:?}");
            let binding = &cluster_bindings[0];
            ensure!(binding.name_any() == qualified && binding.role_ref.name == qualified);
            let subjects = binding.subjects.clone().unwrap_or_default();
            ensure!(
                subjects.len() == 1
                    && subjects[0].name == fullname
                    && subjects[0].namespace.as_deref() == Some(r)
            );
        }
        _ => ensure!(
            cluster_bindings.is_empty(),
            "a ClusterRoleBinding for a namespaced scope"
        ),
    }
    let deployment = Api::<Deployment>::namespaced(admin.clone(), r)
        .get(&fullname)
        .await?;
    check_deployment(&deployment, r, &watch_env)?;
    let service = Api::<Service>::namespaced(admin.clone(), r)
        .get(&format!("{fullname}-metrics"))
        .await?;
    ensure!(
        service
            .spec
            .and_then(|s| s.ports)
            .unwrap_or_default()
            .iter()
            .any(|p| p.name.as_deref() == Some("metrics")),
        "the metrics Service has no port metrics"
    );
    let policy_name = format!("{fullname}-cluster-label.{r}");
    let policy = Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .get(&policy_name)
        .await?;
    let (generated_policy, _) = common_crds::generate::label_policy();
    ensure!(
        json_subset(
            &serde_json::to_value(&generated_policy.spec)?,
            &serde_json::to_value(&policy.spec)?
        ),
        "the chart's label policy is not the generated one: {:?}",
        policy.spec
    );
    // The shared resources operator's policy beside it, its binding keeping its parameter.
    let shared_name = format!("{fullname}-shared-cluster-label.{r}");
    let shared = Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .get(&shared_name)
        .await?;
    let (generated_shared, _) = common_crds::generate::shared_label_policy();
    ensure!(
        json_subset(
            &serde_json::to_value(&generated_shared.spec)?,
            &serde_json::to_value(&shared.spec)?
        ),
        "the chart's shared label policy is not the generated one: {:?}",
        shared.spec
    );
    let shared_binding = Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
        .get(&shared_name)
        .await?
        .spec;
    ensure!(shared_binding.policy_name == shared_name);
    ensure!(
        shared_binding.param_ref.and_then(|p| p.name).as_deref()
            == Some(common_crds::shared::SHARED_NAME),
        "the shared policy's binding lost its parameter"
    );
    let binding = Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
        .get(&policy_name)
        .await?;
    let binding_spec = binding.spec;
    ensure!(binding_spec.policy_name == policy_name);
    ensure!(binding_spec.validation_actions == vec!["Deny".to_string()]);
    let bound_namespaces = binding_spec
        .match_resources
        .and_then(|m| m.namespace_selector)
        .map(|s| serde_json::to_value(s).unwrap_or_default());
    match scope {
        Scope::All => ensure!(bound_namespaces.is_none(), "{bound_namespaces:?}"),
        _ => ensure!(
            bound_namespaces
                == Some(json!({ "matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In", "values": watched,
                }]})),
            "the label policy is bound to {bound_namespaces:?}, not {watched:?}"
        ),
    }
    // The ReplicaSet controller creates the operator's pod in a namespace that enforces the
    // restricted Pod Security profile: it is admitted.
    let pods = Api::<Pod>::namespaced(admin.clone(), r);
    let events = Api::<Event>::namespaced(admin.clone(), r);
    let (pods, events) = (&pods, &events);
    let pod_selector = format!("app.kubernetes.io/instance={release}");
    let pod_selector = &pod_selector;
    let admitted = eventually(
        "the operator's pod is created (or refused)",
        WAIT,
        || async move {
            let list = pods
                .list(&ListParams::default().labels(pod_selector))
                .await?;
            if !list.items.is_empty() {
                return Ok(Some(Ok(())));
            }
            // The ReplicaSet controller reports a refusal as a FailedCreate Event.
            let refused = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
                .find_map(|e| e.message);
            Ok(refused.map(Err))
        },
    )
    .await?;
    if let Err(message) = admitted {
        bail!("the operator's pod is refused under the restricted profile: {message}");
    }

    // RBAC in force for exactly the watched namespaces.
    let infinispans = ("infinispan.org", "infinispans");
    let in_force: Vec<Option<&str>> = match scope {
        Scope::All => vec![None],
        _ => watched.iter().map(|n| Some(*n)).collect(),
    };
    for namespace in in_force {
        let admin = &admin;
        let fullname = &fullname;
        eventually(
            &format!("the operator may list Infinispans in {namespace:?}"),
            WAIT,
            || async move {
                Ok(may(admin, r, fullname, "list", infinispans, namespace)
                    .await?
                    .then_some(()))
            },
        )
        .await?;
    }
    for namespace in &unwatched {
        ensure!(
            !may(&admin, r, &fullname, "list", infinispans, Some(namespace)).await?,
            "the operator may list Infinispans in the unwatched namespace {namespace}"
        );
    }
    ensure!(
        !may(
            &admin,
            r,
            &fullname,
            "patch",
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies"
            ),
            None
        )
        .await?,
        "the chart grants the label-policy rules, which it should not need"
    );

    // The operator's pod, as the kubelet runs it: Ready once its probes pass, which needs the
    // Lease (readiness is leadership).
    for namespace in &unwatched {
        apply_cluster(&admin, namespace, "ignored").await?;
    }
    let pod_name = eventually("the operator's pod", WAIT, || async move {
        let list = pods
            .list(&ListParams::default().labels(pod_selector))
            .await?;
        Ok(list.items.first().map(|p| p.name_any()))
    })
    .await?;
    let checked = async {
        e2e::pods::wait_ready(&admin, r, &pod_name, POD_WAIT).await?;
        let lease = Api::<Lease>::namespaced(admin.clone(), r).get(LEASE).await?;
        ensure!(
            lease.spec.and_then(|s| s.holder_identity).as_deref() == Some(pod_name.as_str()),
            "the Lease {r}/{LEASE} is not held by {pod_name}"
        );
        for namespace in &with_cr {
            apply_cluster(&admin, namespace, "example").await?;
        }
        for namespace in &with_cr {
            let resources_operator = wait_reconciled(&admin, namespace, "example").await?;
            if scope == Scope::Namespace {
                // The chart's PodMonitor selects the pods of this Deployment.
                let objects = template(&release, r, &["--set", "metrics.podMonitor.enabled=true"]).await?;
                let selector = &find(&objects, "PodMonitor", None)?["spec"]["selector"]["matchLabels"];
                let labels = serde_json::to_value(
                    resources_operator
                        .spec
                        .template
                        .metadata
                        .and_then(|m| m.labels),
                )?;
                ensure!(
                    contains_all(&labels, selector),
                    "the PodMonitor {selector} does not select the resources operator's pods {labels}"
                );
            }
        }
        for namespace in &unwatched {
            check_left_alone(&admin, namespace, "ignored").await?;
        }
        let log = pods.logs(&pod_name, &LogParams::default()).await?;
        let refused = refusals(&log);
        ensure!(refused.is_empty(), "the API server refused the operator: {refused:#?}");
        // The chart installed the label policy: the operator does not try (nor warn).
        ensure!(
            log.lines().any(|l| l.contains("--label-policy=external"))
                && !log.lines().any(|l| l.contains("not applied by the operator")),
            "the operator was not told that the chart installs the label policy"
        );
        // Metrics through the chart's Service, as Prometheus scrapes them.
        let page = e2e::pods::scrape(&admin, r, &format!("{fullname}-metrics")).await?;
        ensure!(page.contains("infinispan_cluster_operator_leader 1"), "{page}");
        let exported = metric_names(&page);
        let dashboard_names = dashboard_metric_names(&dashboard()?);
        let missing: Vec<&String> = dashboard_names
            .iter()
            .filter(|n| n.starts_with("infinispan_cluster_operator_") && !exported.contains(*n))
            .collect();
        ensure!(missing.is_empty(), "the dashboard uses {missing:?}, not on /metrics:\n{page}");
        Ok::<(), anyhow::Error>(())
    }
    .await;
    if let Err(error) = checked {
        let logs = e2e::pods::logs_tail(&admin, r, &pod_name).await;
        return Err(error.context(logs));
    }

    for namespace in with_cr.iter().chain(&unwatched) {
        remove_clusters(&admin, namespace).await?;
    }
    uninstall_and_check_clean(&admin, &release, r, &testbed.kubeconfig).await?;
    release_ns.delete().await?;
    other_a.delete().await?;
    other_b.delete().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_namespace_installs_runs_and_uninstalls() -> anyhow::Result<()> {
    install_run_uninstall(Scope::Namespace).await
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_list_installs_runs_and_uninstalls() -> anyhow::Result<()> {
    install_run_uninstall(Scope::List).await
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_all_installs_runs_and_uninstalls() -> anyhow::Result<()> {
    install_run_uninstall(Scope::All).await
}

#[tokio::test(flavor = "multi_thread")]
async fn two_releases_of_the_same_name_install_side_by_side() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    helm_binary()?;
    let admin = testbed.admin_client().await?;
    install_crds(&admin).await?;
    let first = TestNamespace::create(&admin, "helm-twin").await?;
    let second = TestNamespace::create(&admin, "helm-twin").await?;
    let release = format!("twin-{}", &first.name[first.name.len() - 8..]);
    let chart = chart();
    let chart = chart.to_str().context("chart path")?;
    // The second like `make demo`: no Deployment, a chosen ServiceAccount name.
    let account = "infinispan-cluster-operator";
    let account_value = format!("serviceAccount.name={account}");
    for (namespace, values) in [
        (&first.name, vec![]),
        (
            &second.name,
            vec![
                "--set",
                "operator.enabled=false",
                "--set",
                account_value.as_str(),
            ],
        ),
    ] {
        let mut args = vec![
            "install",
            &release,
            chart,
            "--namespace",
            namespace.as_str(),
            "--wait=false",
        ];
        args.extend(values.iter().copied());
        helm(&args, Some(&testbed.kubeconfig))
            .await?
            .ok(&format!("helm install {release} in {namespace}"))?;
    }
    let fullname = format!("{release}-infinispan-operator");
    let policies = Api::<ValidatingAdmissionPolicy>::all(admin.clone());
    for ns in [&first.name, &second.name] {
        let name = format!("{fullname}-cluster-label.{ns}");
        ensure!(policies.get_opt(&name).await?.is_some(), "no policy {name}");
        ensure!(
            Api::<ClusterRole>::all(admin.clone())
                .get_opt(&format!("{fullname}.{ns}"))
                .await?
                .is_some(),
            "no ClusterRole of the release in {ns}"
        );
    }
    // The second has its ServiceAccount bound, and no Deployment.
    ensure!(
        get::<ServiceAccount>(&admin, &second.name, account)
            .await?
            .is_some()
    );
    ensure!(
        get::<Deployment>(&admin, &second.name, &fullname)
            .await?
            .is_none()
    );
    let binding = Api::<RoleBinding>::namespaced(admin.clone(), &second.name)
        .get(&format!("{fullname}.{}", second.name))
        .await?;
    ensure!(
        binding
            .subjects
            .unwrap_or_default()
            .iter()
            .any(|s| s.name == account)
    );
    ensure!(
        may(
            &admin,
            &second.name,
            account,
            "list",
            ("infinispan.org", "infinispans"),
            Some(&second.name)
        )
        .await?
    );

    // The policy is in force in a release's namespace: a Cache without its cluster label is
    // refused with the generated policy's message. (Other suites apply the operator's own
    // cluster-wide copy of the policy on this testbed, which refuses the same: the binding's
    // namespaces are checked above, per scope.)
    let cache: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
        "metadata": { "name": "unlabelled", "namespace": first.name },
        "spec": { "templateName": "t" },
    }))?;
    let caches = Api::<Cache>::namespaced(admin.clone(), &first.name);
    let (caches, cache) = (&caches, &cache);
    let refused = eventually(
        "a Cache without the cluster label is refused",
        WAIT,
        || async move {
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            match caches.create(&params, cache).await {
                Err(kube::Error::Api(status)) => Ok(Some(status.message)),
                Err(other) => Err(other.into()),
                Ok(_) => Ok(None),
            }
        },
    )
    .await?;
    ensure!(
        refused.contains("label infinispan.org/cluster is required"),
        "{refused}"
    );

    // Uninstalling the first leaves the second whole.
    uninstall_and_check_clean(&admin, &release, &first.name, &testbed.kubeconfig).await?;
    let name = format!("{fullname}-cluster-label.{}", second.name);
    ensure!(
        policies.get_opt(&name).await?.is_some(),
        "the second release lost {name}"
    );
    uninstall_and_check_clean(&admin, &release, &second.name, &testbed.kubeconfig).await?;
    first.delete().await?;
    second.delete().await?;
    Ok(())
}
