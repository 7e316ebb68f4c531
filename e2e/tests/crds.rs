//! The API on the real API server: every CRD installs and becomes Established, minimal CRs are
//! accepted with their defaults, each schema/CEL rule rejects what it should with a message a
//! user understands, the admission policy guards the cluster label (design.md N3), and kubectl
//! shows the printer columns, short names and category.
//!
//! Needs the testbed (`make testbed-up`).

use std::time::Duration;

use anyhow::bail;
use e2e::{TestNamespace, Testbed, eventually, install_crds};
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const GROUP: &str = "infinispan.org";

/// (kind, version, plural) of every kind of the API.
const KINDS: [(&str, &str, &str); 9] = [
    ("Infinispan", "v1", "infinispans"),
    ("Backup", "v2alpha1", "backups"),
    ("Restore", "v2alpha1", "restores"),
    ("Batch", "v2alpha1", "batches"),
    ("Cache", "v2alpha1", "caches"),
    ("Template", "v2alpha1", "templates"),
    ("Counter", "v2alpha1", "counters"),
    ("Schema", "v2alpha1", "schemas"),
    ("Task", "v2alpha1", "tasks"),
];

fn resource(kind: &str) -> ApiResource {
    let (kind, version, plural) = KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .copied()
        .unwrap_or_else(|| panic!("unknown kind {kind}"));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

fn api(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(kind))
}

fn object(kind: &str, name: &str, labels: Value, spec: Value) -> anyhow::Result<DynamicObject> {
    let ar = resource(kind);
    Ok(serde_json::from_value(json!({
        "apiVersion": ar.api_version,
        "kind": kind,
        "metadata": { "name": name, "labels": labels },
        "spec": spec,
    }))?)
}

fn cluster_label(cluster: &str) -> Value {
    json!({ "infinispan.org/cluster": cluster })
}

async fn setup(prefix: &str) -> anyhow::Result<(Testbed, Client, TestNamespace)> {
    let testbed = Testbed::get()?;
    let client = testbed.admin_client().await?;
    install_crds(&client).await?;
    let ns = TestNamespace::create(&client, prefix).await?;
    Ok((testbed, client, ns))
}

/// Creates the object; returns the API server's refusal message, or fails if it was accepted.
async fn rejected(api: &Api<DynamicObject>, obj: &DynamicObject) -> anyhow::Result<String> {
    match api.create(&PostParams::default(), obj).await {
        Ok(created) => bail!(
            "the API server accepted an invalid {}: {}",
            obj.types
                .as_ref()
                .map(|t| t.kind.as_str())
                .unwrap_or("object"),
            serde_json::to_string(&created.data)?
        ),
        Err(kube::Error::Api(status)) => Ok(status.message),
        Err(other) => Err(other.into()),
    }
}

fn field<'a>(obj: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(&obj.data, |value, key| value.get(key))
}

#[tokio::test]
async fn all_nine_crds_become_established() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let client = testbed.admin_client().await?;
    install_crds(&client).await?;
    let crds = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(client);
    for (kind, version, plural) in KINDS {
        let crd = crds.get(&format!("{plural}.{GROUP}")).await?;
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.scope, "Namespaced", "{kind} must be namespaced");
        assert!(
            crd.spec
                .versions
                .iter()
                .any(|v| v.name == version && v.served && v.storage)
        );
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{plural}.{GROUP} is not Established");
    }
    Ok(())
}

#[tokio::test]
async fn minimal_crs_are_accepted_and_defaulted() -> anyhow::Result<()> {
    let (_testbed, client, ns) = setup("crd-minimal").await?;
    let pp = PostParams::default();
    let label = cluster_label("demo");

    let ispn = api(&client, &ns.name, "Infinispan")
        .create(&pp, &object("Infinispan", "demo", json!({}), json!({}))?)
        .await?;
    assert_eq!(
        field(&ispn, &["spec", "replicas"]),
        Some(&json!(1)),
        "replicas defaults to 1"
    );
    for (path, expected) in [
        (&["spec", "resourcesOperator", "enabled"][..], json!(true)),
        (
            &["spec", "resourcesOperator", "syncMode"][..],
            json!("Bidirectional"),
        ),
        (
            &["spec", "resourcesOperator", "conflictWinner"][..],
            json!("Kubernetes"),
        ),
        (
            &["spec", "security", "endpointAuthentication"][..],
            json!(true),
        ),
        (
            &["spec", "service", "container", "storage"][..],
            json!("1Gi"),
        ),
    ] {
        assert_eq!(
            field(&ispn, path),
            Some(&expected),
            "default of spec.{}",
            path[1..].join(".")
        );
    }

    let cache = api(&client, &ns.name, "Cache")
        .create(
            &pp,
            &object(
                "Cache",
                "c1",
                label.clone(),
                json!({"templateName": "org.infinispan.DIST_SYNC"}),
            )?,
        )
        .await?;
    assert_eq!(
        field(&cache, &["spec", "deletionPolicy"]),
        Some(&json!("Delete"))
    );

    let template = api(&client, &ns.name, "Template")
        .create(
            &pp,
            &object(
                "Template",
                "t1",
                label.clone(),
                json!({"template": "localCache: {}"}),
            )?,
        )
        .await?;
    assert_eq!(
        field(&template, &["spec", "deletionPolicy"]),
        Some(&json!("Delete"))
    );

    let counter = api(&client, &ns.name, "Counter")
        .create(&pp, &object("Counter", "n1", label.clone(), json!({}))?)
        .await?;
    assert_eq!(field(&counter, &["spec", "type"]), Some(&json!("strong")));
    assert_eq!(field(&counter, &["spec", "initialValue"]), Some(&json!(0)));
    assert_eq!(
        field(&counter, &["spec", "storage"]),
        Some(&json!("Volatile"))
    );
    assert_eq!(
        field(&counter, &["spec", "deletionPolicy"]),
        Some(&json!("Delete"))
    );

    let schema = api(&client, &ns.name, "Schema")
        .create(
            &pp,
            &object(
                "Schema",
                "s1",
                label.clone(),
                json!({"schema": "message A { optional string a = 1; }"}),
            )?,
        )
        .await?;
    assert_eq!(
        field(&schema, &["spec", "deletionPolicy"]),
        Some(&json!("Delete"))
    );

    let task = api(&client, &ns.name, "Task")
        .create(
            &pp,
            &object(
                "Task",
                "k1",
                label.clone(),
                json!({"script": "// mode=local,language=javascript\n1+1"}),
            )?,
        )
        .await?;
    assert_eq!(
        field(&task, &["spec", "deletionPolicy"]),
        Some(&json!("Delete"))
    );

    api(&client, &ns.name, "Backup")
        .create(
            &pp,
            &object("Backup", "b1", json!({}), json!({"cluster": "demo"}))?,
        )
        .await?;
    api(&client, &ns.name, "Restore")
        .create(
            &pp,
            &object(
                "Restore",
                "r1",
                json!({}),
                json!({"cluster": "demo", "backup": "b1"}),
            )?,
        )
        .await?;
    // An archive an infinispan-operator Backup left on its claim.
    api(&client, &ns.name, "Restore")
        .create(
            &pp,
            &object(
                "Restore",
                "r2",
                json!({}),
                json!({"cluster": "demo", "source": {"persistentVolumeClaim": "old"}}),
            )?,
        )
        .await?;
    ns.delete().await
}

#[tokio::test]
async fn schema_and_cel_rules_reject_invalid_crs() -> anyhow::Result<()> {
    let (_testbed, client, ns) = setup("crd-invalid").await?;
    let label = cluster_label("demo");
    // (kind, spec, what the message must say)
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "Cache",
            json!({"template": "localCache: {}", "templateName": "t"}),
            "exactly one of spec.template",
        ),
        ("Cache", json!({}), "exactly one of spec.template"),
        (
            "Cache",
            json!({"templateName": "t", "deletionPolicy": "Maybe"}),
            "Unsupported value: \"Maybe\"",
        ),
        (
            "Cache",
            json!({"templateName": "t", "updates": {"strategy": "sometimes"}}),
            "Unsupported value: \"sometimes\"",
        ),
        (
            "Cache",
            json!({"templateName": "t", "name": ""}),
            "spec.name",
        ),
        ("Template", json!({}), "spec.template: Required value"),
        ("Schema", json!({}), "spec.schema: Required value"),
        ("Task", json!({}), "spec.script: Required value"),
        (
            "Counter",
            json!({"type": "medium"}),
            "Unsupported value: \"medium\"",
        ),
        (
            "Counter",
            json!({"type": "weak", "lowerBound": 0}),
            "strong",
        ),
        (
            "Counter",
            json!({"type": "weak", "upperBound": 10}),
            "strong",
        ),
        (
            "Counter",
            json!({"type": "strong", "concurrencyLevel": 4}),
            "weak",
        ),
        (
            "Counter",
            json!({"lowerBound": 10, "upperBound": 5, "initialValue": 7}),
            "lowerBound",
        ),
        (
            "Counter",
            json!({"lowerBound": 0, "upperBound": 5, "initialValue": 6}),
            "initialValue",
        ),
        ("Counter", json!({"lowerBound": 1}), "initialValue"),
        (
            "Counter",
            json!({"type": "weak", "concurrencyLevel": 0}),
            "concurrencyLevel",
        ),
        (
            "Counter",
            json!({"storage": "Disk"}),
            "Unsupported value: \"Disk\"",
        ),
        ("Infinispan", json!({"replicas": -1}), "spec.replicas"),
        // Cross-site (issue 26).
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON"}, "locations": [{"name": "NYC"}]}}}),
            "a location needs url",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON"}, "locations": [
                {"name": "NYC", "url": "infinispan+xsite://nyc", "namespace": "b"}]}}}),
            "either url or namespace/clusterName",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON"}, "locations": [
                {"name": "LON", "namespace": "b"}]}}}),
            "must not have the local site's name",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON"}, "locations": [
                {"name": "NYC", "namespace": "b"}, {"name": "NYC", "namespace": "c"}]}}}),
            "two locations have the same name",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON"}, "locations": [
                {"name": "NYC", "url": "kubernetes://api.nyc.example.com:6443"}]}}}),
            "spec.service.sites.locations[0].url",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON", "discovery": {
                "heartbeats": {"interval": 5000, "timeout": 4000}}}}}}),
            "timeout must be longer than its interval",
        ),
        (
            "Infinispan",
            json!({"service": {"sites": {"local": {"name": "LON site"}}}}),
            "spec.service.sites.local.name",
        ),
        (
            "Infinispan",
            json!({"resourcesOperator": {"syncMode": "Sideways"}}),
            "Unsupported value: \"Sideways\"",
        ),
        (
            "Infinispan",
            json!({"security": {"endpointEncryption": {"type": "Secret"}}}),
            "certSecretName",
        ),
        (
            "Infinispan",
            json!({"security": {"endpointEncryption": {"clientCert": "Validate"}}}),
            "clientCertSecretName is required",
        ),
        (
            "Infinispan",
            json!({"security": {"endpointEncryption": {"type": "None", "clientCert": "Validate", "clientCertSecretName": "cas"}}}),
            "clientCert needs TLS on the endpoint",
        ),
        (
            "Infinispan",
            json!({"security": {"endpointAuthentication": false, "endpointEncryption": {"type": "Generated", "clientCert": "Authenticate", "clientCertSecretName": "cas"}}}),
            "Authenticate identifies clients by their certificate",
        ),
        (
            "Infinispan",
            json!({"logging": {"pattern": "${env:INFINISPAN_KEYSTORE_PASSWORD} %m%n"}}),
            "may not contain '$'",
        ),
        ("Backup", json!({}), "spec.cluster: Required value"),
        (
            "Batch",
            json!({"cluster": "demo"}),
            "exactly one of spec.config (the script) and spec.configMap",
        ),
        (
            "Batch",
            json!({"cluster": "demo", "config": "create counter c", "configMap": "script"}),
            "exactly one of spec.config (the script) and spec.configMap",
        ),
        (
            "Restore",
            json!({"cluster": "demo"}),
            "either spec.backup (a Backup CR) or spec.source",
        ),
        (
            "Restore",
            json!({"cluster": "demo", "backup": "b", "source": {"persistentVolumeClaim": "b"}}),
            "either spec.backup (a Backup CR) or spec.source",
        ),
        (
            "Backup",
            json!({"cluster": "demo", "storage": "Bucket"}),
            "Unsupported value: \"Bucket\"",
        ),
    ];
    let mut failures = Vec::new();
    for (i, (kind, spec, expected)) in cases.into_iter().enumerate() {
        let labels = if matches!(kind, "Infinispan" | "Backup" | "Restore" | "Batch") {
            json!({})
        } else {
            label.clone()
        };
        let obj = object(kind, &format!("bad-{i}"), labels, spec.clone())?;
        match rejected(&api(&client, &ns.name, kind), &obj).await {
            Ok(message) if message.contains(expected) => {}
            Ok(message) => failures.push(format!(
                "{kind} {spec}: message {message:?} does not say {expected:?}"
            )),
            Err(error) => failures.push(format!("{kind} {spec}: {error:#}")),
        }
    }
    // Names whose objects would be another cluster's (`a-ping` is cluster `a`'s headless
    // Service and cluster `a-ping`'s client Service).
    for name in ["demo-ping", "demo-operator", "demo-external"] {
        let obj = object("Infinispan", name, json!({}), json!({}))?;
        match rejected(&api(&client, &ns.name, "Infinispan"), &obj).await {
            Ok(message) if message.contains("must not end with -ping, -operator or -external") => {}
            Ok(message) => failures.push(format!("Infinispan {name}: message {message:?}")),
            Err(error) => failures.push(format!("Infinispan {name}: {error:#}")),
        }
    }
    assert!(
        failures.is_empty(),
        "invalid CRs not rejected as they should be:\n{}",
        failures.join("\n")
    );
    ns.delete().await
}

/// Whether `stored` has everything of `written` (objects key by key, other values equal).
fn holds(stored: &Value, written: &Value) -> bool {
    match written.as_object() {
        Some(fields) => fields
            .iter()
            .all(|(key, value)| stored.get(key).is_some_and(|s| holds(s, value))),
        None => stored == written,
    }
}

/// The pods' and Services' labels and annotations, probe timings, grace period and the
/// resources operator's pods: everything valid is accepted as written (nothing defaulted into
/// it); the operator's own label and annotation keys, a liveness or startup successThreshold
/// other than 1 and values under their minimum are refused with a message that says why.
#[tokio::test]
async fn pod_and_service_metadata_and_tuning_are_validated() -> anyhow::Result<()> {
    let (_testbed, client, ns) = setup("crd-podmeta").await?;
    let infinispans = api(&client, &ns.name, "Infinispan");
    let valid = json!({
        "service": {
            "container": {
                "terminationGracePeriodSeconds": 0,
                "livenessProbe": {"failureThreshold": 10, "successThreshold": 1},
                "readinessProbe": {"successThreshold": 3, "initialDelaySeconds": 0,
                                   "periodSeconds": 1, "timeoutSeconds": 1},
                "startupProbe": {"failureThreshold": 1},
            },
            "podLabels": {"team": "shop", "app.kubernetes.io/version": "16.0.7"},
            "podAnnotations": {"sidecar.istio.io/inject": "false"},
            "serviceLabels": {"team": "shop"},
            "serviceAnnotations": {"example.com/owner": "shop"},
            "clientService": {"labels": {"monitoring": "scrape"}},
            "pingService": {"annotations": {"example.com/owner": "jgroups"}},
            "operatorService": {"labels": {"x": "y"}},
        },
        "expose": {"type": "LoadBalancer", "labels": {"public": "yes"}},
        "resourcesOperator": {
            "replicas": 2,
            "scheduling": {"nodeSelector": {"kubernetes.io/os": "linux"},
                           "tolerations": [{"key": "k", "operator": "Exists"}]},
            "imagePullSecrets": [{"name": "team-registry"}],
        },
    });
    let created = infinispans
        .create(
            &PostParams::default(),
            &object("Infinispan", "tuned", json!({}), valid.clone())?,
        )
        .await?;
    // Stored as written; the API server adds defaults of other fields only (storage...).
    let stored = field(&created, &["spec"]).cloned().unwrap_or_default();
    assert!(holds(&stored, &valid), "stored {stored}\nwritten {valid}");
    assert_eq!(
        field(&created, &["spec", "resourcesOperator", "replicas"]),
        Some(&json!(2))
    );
    // A CR without them stores none of them.
    let plain = infinispans
        .create(
            &PostParams::default(),
            &object("Infinispan", "plain", json!({}), json!({}))?,
        )
        .await?;
    let service = field(&plain, &["spec", "service"])
        .cloned()
        .unwrap_or_default();
    for absent in [
        "podLabels",
        "podAnnotations",
        "serviceLabels",
        "clientService",
    ] {
        assert_eq!(service.get(absent), None, "{absent} defaulted: {service}");
    }
    let container = service.get("container").cloned().unwrap_or_default();
    for absent in ["livenessProbe", "terminationGracePeriodSeconds"] {
        assert_eq!(
            container.get(absent),
            None,
            "{absent} defaulted: {container}"
        );
    }

    // The handler is the operator's: not a field, pruned.
    let handler = infinispans
        .create(
            &PostParams::default(),
            &object(
                "Infinispan",
                "handler",
                json!({}),
                json!({"service": {"container": {"livenessProbe": {
                    "exec": {"command": ["true"]}, "periodSeconds": 3}}}}),
            )?,
        )
        .await?;
    assert_eq!(
        field(&handler, &["spec", "service", "container", "livenessProbe"]),
        Some(&json!({"periodSeconds": 3}))
    );

    let operator_labels = "app.kubernetes.io/name, instance, component, part-of and managed-by";
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"service": {"podLabels": {"app.kubernetes.io/instance": "other"}}}),
            operator_labels,
        ),
        (
            json!({"service": {"podLabels": {"infinispan.org/cluster": "other"}}}),
            operator_labels,
        ),
        (
            json!({"service": {"serviceLabels": {"app.kubernetes.io/managed-by": "me"}}}),
            operator_labels,
        ),
        (
            json!({"service": {"clientService": {"labels": {"app.kubernetes.io/name": "x"}}}}),
            operator_labels,
        ),
        (
            json!({"expose": {"type": "NodePort", "labels": {"app.kubernetes.io/part-of": "x"}}}),
            operator_labels,
        ),
        (
            json!({"service": {"podAnnotations": {"infinispan.org/config-hash": "x"}}}),
            "annotations in the infinispan.org/ domain are the operator's",
        ),
        (
            json!({"service": {"pingService": {"annotations": {"infinispan.org/x": "y"}}}}),
            "annotations in the infinispan.org/ domain are the operator's",
        ),
        (
            json!({"service": {"podLabels": Value::Object(many)}}),
            "spec.service.podLabels: Too many",
        ),
        (
            json!({"service": {"container": {"livenessProbe": {"successThreshold": 2}}}}),
            "the liveness probe's successThreshold must be 1",
        ),
        (
            json!({"service": {"container": {"startupProbe": {"successThreshold": 3}}}}),
            "the startup probe's successThreshold must be 1",
        ),
        (
            json!({"service": {"container": {"readinessProbe": {"periodSeconds": 0}}}}),
            "spec.service.container.readinessProbe.periodSeconds",
        ),
        (
            json!({"service": {"container": {"livenessProbe": {"failureThreshold": 0}}}}),
            "spec.service.container.livenessProbe.failureThreshold",
        ),
        (
            json!({"service": {"container": {"startupProbe": {"timeoutSeconds": 0}}}}),
            "spec.service.container.startupProbe.timeoutSeconds",
        ),
        (
            json!({"service": {"container": {"readinessProbe": {"initialDelaySeconds": -1}}}}),
            "spec.service.container.readinessProbe.initialDelaySeconds",
        ),
        (
            json!({"service": {"container": {"terminationGracePeriodSeconds": -1}}}),
            "spec.service.container.terminationGracePeriodSeconds",
        ),
        (
            json!({"resourcesOperator": {"replicas": 0}}),
            "spec.resourcesOperator.replicas",
        ),
    ];
    let mut failures = Vec::new();
    for (i, (spec, expected)) in cases.into_iter().enumerate() {
        let obj = object("Infinispan", &format!("bad-{i}"), json!({}), spec.clone())?;
        match rejected(&infinispans, &obj).await {
            Ok(message) if message.contains(expected) => {}
            Ok(message) => failures.push(format!(
                "{spec}: message {message:?} does not say {expected:?}"
            )),
            Err(error) => failures.push(format!("{spec}: {error:#}")),
        }
    }
    assert!(
        failures.is_empty(),
        "invalid CRs not rejected as they should be:\n{}",
        failures.join("\n")
    );
    ns.delete().await
}

#[tokio::test]
async fn spec_name_is_immutable_once_set() -> anyhow::Result<()> {
    let (_testbed, client, ns) = setup("crd-name").await?;
    let caches = api(&client, &ns.name, "Cache");
    let label = cluster_label("demo");
    let patch = |spec: Value| Patch::Merge(json!({ "spec": spec }));
    let pp = PatchParams::default();

    // Set at creation: cannot be changed nor removed.
    caches
        .create(
            &PostParams::default(),
            &object(
                "Cache",
                "named",
                label.clone(),
                json!({"name": "orders", "templateName": "t"}),
            )?,
        )
        .await?;
    for change in [json!({"name": "invoices"}), json!({"name": null})] {
        match caches.patch("named", &pp, &patch(change.clone())).await {
            Ok(_) => bail!("spec.name change {change} was accepted"),
            Err(kube::Error::Api(status)) => assert!(
                status.message.contains("spec.name is immutable"),
                "unexpected message for {change}: {}",
                status.message
            ),
            Err(other) => return Err(other.into()),
        }
    }
    // Other fields stay editable.
    caches
        .patch("named", &pp, &patch(json!({"templateName": "t2"})))
        .await?;

    // Absent at creation: may be added only as the name it already had (metadata.name).
    caches
        .create(
            &PostParams::default(),
            &object(
                "Cache",
                "unnamed",
                label.clone(),
                json!({"templateName": "t"}),
            )?,
        )
        .await?;
    match caches
        .patch("unnamed", &pp, &patch(json!({"name": "other"})))
        .await
    {
        Ok(_) => bail!("adding a spec.name different from metadata.name was accepted"),
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("spec.name is immutable"),
            "{}",
            status.message
        ),
        Err(other) => return Err(other.into()),
    }
    let updated = caches
        .patch("unnamed", &pp, &patch(json!({"name": "unnamed"})))
        .await?;
    assert_eq!(field(&updated, &["spec", "name"]), Some(&json!("unnamed")));
    ns.delete().await
}

/// Applies the label policies and their bindings, and waits until the API server enforces it
/// (policies are compiled asynchronously after they are written).
async fn install_label_policy(client: &Client, probe_ns: &str) -> anyhow::Result<()> {
    e2e::apply_label_policies(client).await?;
    let caches = api(client, probe_ns, "Cache");
    eventually(
        "the label policy is enforced",
        Duration::from_secs(60),
        || {
            let caches = caches.clone();
            async move {
                let probe = object(
                    "Cache",
                    "policy-probe",
                    json!({}),
                    json!({"templateName": "t"}),
                )?;
                match caches.create(&PostParams::default(), &probe).await {
                    Ok(_) => {
                        caches.delete("policy-probe", &Default::default()).await?;
                        Ok(None)
                    }
                    Err(kube::Error::Api(status))
                        if status.message.contains("infinispan.org/cluster") =>
                    {
                        Ok(Some(()))
                    }
                    Err(other) => Err(other.into()),
                }
            }
        },
    )
    .await
}

#[tokio::test]
async fn cluster_label_cannot_be_changed_or_removed() -> anyhow::Result<()> {
    let (_testbed, client, ns) = setup("crd-label").await?;
    install_label_policy(&client, &ns.name).await?;
    let pp = PatchParams::default();
    for kind in ["Cache", "Template", "Counter", "Schema", "Task"] {
        let api = api(&client, &ns.name, kind);
        let spec = match kind {
            "Cache" => json!({"templateName": "t"}),
            "Template" => json!({"template": "localCache: {}"}),
            "Counter" => json!({}),
            "Schema" => json!({"schema": "message A {}"}),
            _ => json!({"script": "1"}),
        };
        let name = format!("{}-labelled", kind.to_lowercase());

        // Missing at creation: refused with a message naming the label.
        let message = rejected(
            &api,
            &object(kind, &format!("{name}-none"), json!({}), spec.clone())?,
        )
        .await?;
        assert!(
            message.contains("infinispan.org/cluster"),
            "{kind} without label: {message}"
        );

        api.create(
            &PostParams::default(),
            &object(kind, &name, cluster_label("alpha"), spec)?,
        )
        .await?;
        for (what, labels) in [
            ("changed", json!({"infinispan.org/cluster": "beta"})),
            ("removed", json!({"infinispan.org/cluster": null})),
        ] {
            match api
                .patch(
                    &name,
                    &pp,
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await
            {
                Ok(_) => bail!("{kind}: the cluster label was {what}"),
                Err(kube::Error::Api(status)) => {
                    assert!(
                        status.message.contains("infinispan.org/cluster"),
                        "{kind} label {what}: {}",
                        status.message
                    );
                    assert!(
                        status.message.contains("alpha"),
                        "{kind}: the message should name the old value: {}",
                        status.message
                    );
                }
                Err(other) => return Err(other.into()),
            }
        }
        // Other labels stay free.
        api.patch(
            &name,
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"team": "payments"}}})),
        )
        .await?;
        let current = api.get(&name).await?;
        assert_eq!(
            current
                .metadata
                .labels
                .unwrap_or_default()
                .get("infinispan.org/cluster")
                .map(String::as_str),
            Some("alpha")
        );
    }
    ns.delete().await
}

/// The label policy confines a resources operator to its own cluster's CRs, which its Role
/// cannot (RBAC does not select by label): with its real ServiceAccount, Role and token, the
/// resources operator of `alpha` creates, changes and deletes CRs labelled `alpha`, and is
/// refused with a message naming both clusters for a CR of `beta`; the admin is not limited.
#[tokio::test]
async fn a_resources_operator_writes_only_its_own_clusters_resources() -> anyhow::Result<()> {
    let (testbed, admin, ns) = setup("crd-confined").await?;
    install_label_policy(&admin, &ns.name).await?;
    let identity = e2e::identity::OperatorIdentity::create(
        &admin,
        &testbed,
        common_crds::rbac::OperatorScope {
            cluster: "alpha",
            namespace: &ns.name,
            credentials_secret: "alpha-operator-credentials",
        },
    )
    .await?;
    let operator = identity.client().await?;
    let spec = json!({"templateName": "t"});
    let as_operator = api(&operator, &ns.name, "Cache");
    let as_admin = api(&admin, &ns.name, "Cache");
    let pp = PatchParams::default();
    let change = Patch::Merge(json!({"spec": {"templateName": "u"}}));

    // Its own cluster's: created, changed, deleted.
    as_operator
        .create(
            &PostParams::default(),
            &object("Cache", "own", cluster_label("alpha"), spec.clone())?,
        )
        .await?;
    as_operator.patch("own", &pp, &change).await?;
    as_operator.delete("own", &Default::default()).await?;

    // Another cluster's: refused whatever the verb (once the API server has compiled this
    // version of the policy, which may have been applied just now).
    let theirs_new = object("Cache", "theirs-new", cluster_label("beta"), spec.clone())?;
    let message = eventually(
        "the policy refuses alpha's operator a CR of beta",
        Duration::from_secs(60),
        || {
            let (as_operator, as_admin) = (as_operator.clone(), as_admin.clone());
            let theirs_new = theirs_new.clone();
            async move {
                match as_operator
                    .create(&PostParams::default(), &theirs_new)
                    .await
                {
                    Ok(_) => {
                        // Not enforced yet: undo, try again.
                        as_admin.delete("theirs-new", &Default::default()).await?;
                        Ok(None)
                    }
                    Err(kube::Error::Api(status)) => Ok(Some(status.message)),
                    Err(other) => Err(other.into()),
                }
            }
        },
    )
    .await?;
    let names_both = |message: &str| {
        message.contains("resources operator of cluster \"alpha\"")
            && message.contains("not \"beta\"")
    };
    anyhow::ensure!(names_both(&message), "create: {message}");
    as_admin
        .create(
            &PostParams::default(),
            &object("Cache", "theirs", cluster_label("beta"), spec)?,
        )
        .await?;
    for (verb, result) in [
        (
            "update",
            as_operator.patch("theirs", &pp, &change).await.err(),
        ),
        (
            "delete",
            as_operator
                .delete("theirs", &Default::default())
                .await
                .err(),
        ),
    ] {
        match result {
            Some(kube::Error::Api(status)) => {
                anyhow::ensure!(names_both(&status.message), "{verb}: {}", status.message)
            }
            Some(other) => return Err(other.into()),
            None => bail!("the resources operator of alpha could {verb} a CR of beta"),
        }
    }
    // Anyone else (here the admin) is not confined.
    as_admin.patch("theirs", &pp, &change).await?;
    as_admin.delete("theirs", &Default::default()).await?;
    ns.delete().await
}

fn kubectl_stdout(testbed: &Testbed, args: &[&str]) -> anyhow::Result<String> {
    let output = testbed.kubectl().args(args).output()?;
    if !output.status.success() {
        bail!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

#[tokio::test]
async fn kubectl_shows_printer_columns_short_names_and_category() -> anyhow::Result<()> {
    let (testbed, client, ns) = setup("crd-columns").await?;
    let labels = json!({"infinispan.org/cluster": "demo"});
    let resource_columns = [
        "NAME",
        "CLUSTER",
        "SERVER-NAME",
        "READY",
        "REASON",
        "ORIGIN",
        "AGE",
    ];
    let cases = [
        (
            "Cache",
            "caches",
            "ispncache",
            json!({"name": "Orders", "templateName": "t"}),
        ),
        (
            "Template",
            "templates",
            "ispntemplate",
            json!({"template": "localCache: {}"}),
        ),
        ("Counter", "counters", "ispncounter", json!({})),
        (
            "Schema",
            "schemas",
            "ispnschema",
            json!({"schema": "message A {}"}),
        ),
        ("Task", "tasks", "ispntask", json!({"script": "1"})),
    ];
    for (kind, plural, short, spec) in cases {
        let name = format!("{}-one", kind.to_lowercase());
        api(&client, &ns.name, kind)
            .create(
                &PostParams::default(),
                &object(kind, &name, labels.clone(), spec)?,
            )
            .await?;
        let table = kubectl_stdout(&testbed, &["get", plural, "-n", &ns.name])?;
        let mut lines = table
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>());
        assert_eq!(
            lines.next().unwrap_or_default(),
            resource_columns,
            "kubectl get {plural}:\n{table}"
        );
        let row = lines.next().unwrap_or_default();
        assert_eq!(row.first(), Some(&name.as_str()), "{table}");
        assert_eq!(
            row.get(1),
            Some(&"demo"),
            "the Cluster column shows the label: {table}"
        );
        // No resources operator runs here: the columns read from the status (Server-Name,
        // Ready, Reason, Origin) stay empty until one writes it (their values with an operator:
        // cache_sync's `kubectl_get_shows_the_server_name_and_origin_of_every_cr`).
        assert_eq!(
            row.len(),
            3,
            "only NAME, CLUSTER and AGE before any status: {table}"
        );

        let by_short = kubectl_stdout(&testbed, &["get", short, "-n", &ns.name, "-o", "name"])?;
        assert!(
            by_short.contains(&name),
            "short name {short} does not list {name}: {by_short}"
        );
    }
    api(&client, &ns.name, "Infinispan")
        .create(
            &PostParams::default(),
            &object("Infinispan", "demo", json!({}), json!({"replicas": 3}))?,
        )
        .await?;
    let table = kubectl_stdout(&testbed, &["get", "ispn", "-n", &ns.name])?;
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "REPLICAS", "VERSION", "AGE"] {
        assert!(
            header.split_whitespace().any(|c| c == column),
            "kubectl get ispn lacks {column}: {table}"
        );
    }

    // The category lists every kind at once.
    let all = kubectl_stdout(
        &testbed,
        &["get", "infinispan-all", "-n", &ns.name, "-o", "name"],
    )?;
    for expected in [
        "cache.infinispan.org/cache-one",
        "counter.infinispan.org/counter-one",
        "task.infinispan.org/task-one",
        "infinispan.infinispan.org/demo",
    ] {
        assert!(
            all.contains(expected),
            "category infinispan-all lacks {expected}: {all}"
        );
    }
    // The category does not shadow the kind: one cluster by its singular name.
    let one = kubectl_stdout(
        &testbed,
        &["get", "infinispan", "demo", "-n", &ns.name, "-o", "name"],
    )?;
    assert_eq!(one.trim(), "infinispan.infinispan.org/demo");
    ns.delete().await
}
