//! The operator installed through OLM for real (issue 22), on the testbed's node: OLM's own olm
//! and catalog operators run as pods from the image built here (`e2e/testbed/olm.sh`, part of
//! `make testbed-up`), and our catalog image is served by a `CatalogSource` of type grpc. The
//! catalog is the one `make images` pushes for the node (`TESTBED_OLM_LOCAL_CATALOG_IMAGE`): its
//! bundle's CSV names the operator and server images built here instead of quay.io's, as a
//! mirror rewrites them; nothing else differs from `olm/`.
//!
//! - OwnNamespace: `CatalogSource` (in `olm`, OLM's global catalog namespace) -> `OperatorGroup`
//!   targeting its own namespace -> `Subscription` with manual approval -> the `InstallPlan`
//!   (the CSV, its CRDs, its RBAC) approved -> the CSV `Succeeded` -> the operator's Deployment
//!   Ready on the image built here -> the label policy applied by the operator itself (the CSV's
//!   cluster permissions) and enforced -> an `Infinispan` CR gives a running cluster (its
//!   StatefulSet, a Ready server pod on the server image built here, the CR `Ready`) -> the
//!   Subscription and CSV deleted: OLM removes the operator's Deployment, the CR and its running
//!   server pod stay -> subscribed again: the new operator adopts the cluster (the pod is left
//!   alone, the next change of the CR is applied).
//! - Every install mode the CSV declares (all four: checked against the CSV), one after the
//!   other in one operator namespace: a cluster is reconciled in each target namespace and in
//!   no other.
//!
//! OLM's bundle unpack Job, its InstallPlan and the CSV's install strategy are OLM's own code:
//! nothing here stands in for them.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common_crds::Infinispan;
use common_crds::generate::LABEL_POLICY_NAME;
use common_crds::labels::{CLUSTER_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER};
use e2e::cluster_operator::condition;
use e2e::pods::{Images, SERVER_VERSION, require_node, wait_ready};
use e2e::{TestNamespace, Testbed, eventually, parse_env_file};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// OLM's namespace (olm.sh), where global CatalogSources live and bundles are unpacked.
const OLM_NAMESPACE: &str = "olm";
/// The package, its channel and the CSV the catalog's channel head is.
const PACKAGE: &str = "infinispan-operator";
const CHANNEL: &str = "alpha";
const CSV: &str = "infinispan-operator.v0.1.0";
/// The CSV's Deployment.
const DEPLOYMENT: &str = "infinispan-cluster-operator";
/// From the Subscription to the operator Ready: the catalog pod, the bundle unpack Job (three
/// images pulled from the local registry), the InstallPlan, the operator's pod.
const INSTALL_WAIT: Duration = Duration::from_secs(300);
/// A server pod needs up to a minute once its image is on the node.
const CLUSTER_WAIT: Duration = Duration::from_secs(240);
const WAIT: Duration = Duration::from_secs(60);
/// The field manager of what this suite applies.
const MANAGER: &str = "e2e-olm-install";

/// An OLM kind of `operators.coreos.com`.
fn olm_resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "operators.coreos.com".into(),
        version: version.into(),
        api_version: format!("operators.coreos.com/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

struct Olm {
    client: Client,
}

impl Olm {
    fn api(&self, namespace: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace,
            &olm_resource(version, kind, plural),
        )
    }
    fn catalog_sources(&self) -> Api<DynamicObject> {
        self.api(OLM_NAMESPACE, "v1alpha1", "CatalogSource", "catalogsources")
    }
    fn operator_groups(&self, ns: &str) -> Api<DynamicObject> {
        self.api(ns, "v1", "OperatorGroup", "operatorgroups")
    }
    fn subscriptions(&self, ns: &str) -> Api<DynamicObject> {
        self.api(ns, "v1alpha1", "Subscription", "subscriptions")
    }
    fn install_plans(&self, ns: &str) -> Api<DynamicObject> {
        self.api(ns, "v1alpha1", "InstallPlan", "installplans")
    }
    fn csvs(&self, ns: &str) -> Api<DynamicObject> {
        self.api(
            ns,
            "v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
        )
    }
}

/// Server-side apply of `object` (apiVersion, kind, metadata.name in it) through `api`.
async fn apply(api: &Api<DynamicObject>, object: Value) -> anyhow::Result<DynamicObject> {
    let name = object["metadata"]["name"]
        .as_str()
        .context("an object without name")?
        .to_string();
    let object: DynamicObject = serde_json::from_value(object)?;
    Ok(api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await?)
}

/// The testbed with its node, OLM Ready on it, and the node's catalog image; or an error saying
/// how to get them.
async fn olm_testbed() -> anyhow::Result<(Testbed, Client, Images, String)> {
    let testbed = Testbed::get()?;
    let vars = require_node(&testbed)?;
    let images = Images::get(&testbed)?;
    let client = testbed.admin_client().await?;
    let how = "OLM is installed on the node by `make testbed-up` (e2e/testbed/olm.sh up; not \
               with TESTBED_OLM=0)";
    ensure!(
        vars.get("TESTBED_OLM").map(String::as_str) != Some("0"),
        "this testbed was started with TESTBED_OLM=0: {how}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    for name in ["olm-operator", "catalog-operator"] {
        let ready = deployments
            .get_opt(name)
            .await?
            .and_then(|d| d.status)
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        ensure!(
            ready >= 1,
            "OLM's {name} is not Ready in namespace {OLM_NAMESPACE}: {how}; \
             `e2e/testbed/olm.sh status` says what is wrong"
        );
    }
    let path = testbed.run_dir.join("images.env");
    let catalog = parse_env_file(&std::fs::read_to_string(&path)?)
        .get("TESTBED_OLM_LOCAL_CATALOG_IMAGE")
        .cloned()
        .with_context(|| {
            format!(
                "{} has no TESTBED_OLM_LOCAL_CATALOG_IMAGE: run `make images`",
                path.display()
            )
        })?;
    Ok((testbed, client, images, catalog))
}

/// A test's CatalogSource in OLM's namespace (not the test's, which goes with the test): deleted
/// with `kubectl` when a failed test drops it (its catalog pod would run on).
struct CatalogSourceGuard {
    name: String,
    kubectl: std::process::Command,
    deleted: bool,
}

impl CatalogSourceGuard {
    fn new(testbed: &Testbed, name: String) -> Self {
        Self {
            name,
            kubectl: testbed.kubectl(),
            deleted: false,
        }
    }
}

impl Drop for CatalogSourceGuard {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        let result = self
            .kubectl
            .args([
                "-n",
                OLM_NAMESPACE,
                "delete",
                "catalogsource",
                &self.name,
                "--wait=false",
            ])
            .stdin(std::process::Stdio::null())
            .output();
        eprintln!(
            "CatalogSource {OLM_NAMESPACE}/{} of a failed test: deleted ({result:?})",
            self.name
        );
    }
}

/// A grpc CatalogSource `name` in OLM's namespace serving `image`, once OLM says it is READY.
async fn create_catalog_source(olm: &Olm, name: &str, image: &str) -> anyhow::Result<()> {
    apply(
        &olm.catalog_sources(),
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": OLM_NAMESPACE},
            "spec": {
                "sourceType": "grpc",
                "image": image,
                "displayName": "Infinispan operators (e2e)",
                "publisher": "e2e",
            },
        }),
    )
    .await?;
    let api = olm.catalog_sources();
    eventually(
        &format!("CatalogSource {OLM_NAMESPACE}/{name} READY"),
        INSTALL_WAIT,
        || {
            let api = api.clone();
            async move {
                let source = api.get(name).await?;
                let state = &source.data["status"]["connectionState"]["lastObservedState"];
                Ok((state == "READY").then_some(()))
            }
        },
    )
    .await
}

/// Waits until the Subscription (named after the package) refers to an InstallPlan installing
/// exactly the CSV `csv` and waiting for approval, and approves it.
async fn approve_install_plan(olm: &Olm, ns: &str, csv: &str) -> anyhow::Result<()> {
    let subscriptions = olm.subscriptions(ns);
    let plans = olm.install_plans(ns);
    let plan = eventually(
        &format!("Subscription {ns}/{PACKAGE} has an InstallPlan for {csv}"),
        INSTALL_WAIT,
        || {
            let subscriptions = subscriptions.clone();
            let plans = plans.clone();
            async move {
                let sub = subscriptions.get(PACKAGE).await?;
                let Some(name) = sub.data["status"]["installPlanRef"]["name"].as_str() else {
                    return Ok(None);
                };
                let plan = plans.get(name).await?;
                Ok(
                    (plan.data["spec"]["clusterServiceVersionNames"] == json!([csv]))
                        .then_some(plan),
                )
            }
        },
    )
    .await?;
    let spec = &plan.data["spec"];
    ensure!(
        spec["approval"] == "Manual" && spec["approved"] == false,
        "InstallPlan {} is not waiting for approval: {spec}",
        plan.name_any()
    );
    plans
        .patch(
            &plan.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"approved": true}})),
        )
        .await?;
    Ok(())
}

/// How long a CSV may stay `Failed` before the install counts as failed: OLM retries a failed
/// install check (a Deployment not yet available on a loaded node) and the CSV goes back
/// through `Pending`; a failure that lasts is OLM's verdict.
const CSV_FAILED_FOR: Duration = Duration::from_secs(60);

/// Waits until the CSV `name` is `Succeeded`; fails when OLM says `Failed` for
/// [`CSV_FAILED_FOR`] (a shorter `Failed` is printed and waited out).
async fn wait_csv_succeeded(olm: &Olm, ns: &str, name: &str) -> anyhow::Result<DynamicObject> {
    let csvs = olm.csvs(ns);
    let failed_since = std::sync::Mutex::new(None::<Instant>);
    let failed_since = &failed_since;
    let outcome = eventually(&format!("CSV {ns}/{name} Succeeded"), INSTALL_WAIT, || {
        let csvs = csvs.clone();
        async move {
            let Some(csv) = csvs.get_opt(name).await? else {
                return Ok(None);
            };
            let status = &csv.data["status"];
            let mut since = failed_since.lock().expect("not poisoned");
            Ok(match status["phase"].as_str() {
                Some("Succeeded") => Some(Ok(csv)),
                Some("Failed") => {
                    let problem = format!("{}: {}", status["reason"], status["message"]);
                    let first = *since.get_or_insert_with(|| {
                        eprintln!("CSV {ns}/{name} Failed ({problem}); OLM retries, waiting");
                        Instant::now()
                    });
                    (first.elapsed() >= CSV_FAILED_FOR).then_some(Err(problem))
                }
                _ => {
                    *since = None;
                    None
                }
            })
        }
    })
    .await?;
    outcome.map_err(|problem| {
        anyhow::anyhow!("CSV {ns}/{name} Failed for {CSV_FAILED_FOR:?}: {problem}")
    })
}

/// The image of a pod's first container.
fn first_image(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}

/// The single pod of the operator's Deployment, Ready.
async fn operator_pod(client: &Client, ns: &str) -> anyhow::Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let name = eventually("the operator's pod", INSTALL_WAIT, || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(
                    &ListParams::default()
                        .labels("app.kubernetes.io/name=infinispan-cluster-operator"),
                )
                .await?;
            Ok(match list.items.as_slice() {
                [pod] => Some(pod.name_any()),
                _ => None,
            })
        }
    })
    .await?;
    wait_ready(client, ns, &name, INSTALL_WAIT).await
}

/// The names of the label policies, each its binding's too (the cluster label's and the shared
/// resources operator's).
fn label_policy_names() -> Vec<String> {
    common_crds::generate::label_policies()
        .into_iter()
        .filter_map(|(policy, _)| policy.metadata.name)
        .collect()
}

/// Whether every label policy and its binding exist.
async fn label_policy_present(client: &Client) -> anyhow::Result<bool> {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    for name in label_policy_names() {
        if policies.get_opt(&name).await?.is_none() || bindings.get_opt(&name).await?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One install at a time: two CSVs of the package whose OperatorGroups overlap conflict (OLM
/// fails the second), and an AllNamespaces operator reconciles every namespace's clusters.
static INSTALLS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The operator installed through OLM in one namespace.
struct Installed {
    /// From the Subscription's creation to the operator's pod Ready.
    took: Duration,
    pod: Pod,
}

/// The OperatorGroup of `ns` targeting `targets` (all namespaces when empty).
async fn create_operator_group(olm: &Olm, ns: &str, targets: &[&str]) -> anyhow::Result<()> {
    let spec = if targets.is_empty() {
        json!({})
    } else {
        json!({"targetNamespaces": targets})
    };
    apply(
        &olm.operator_groups(ns),
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "infinispan-operator", "namespace": ns},
            "spec": spec,
        }),
    )
    .await?;
    Ok(())
}

/// Subscribes `ns` (which has its OperatorGroup) to the package from the CatalogSource `source`
/// with manual approval, approves the InstallPlan, and waits for the CSV `Succeeded` and the
/// operator's pod Ready on the image built here.
async fn subscribe(
    olm: &Olm,
    images: &Images,
    ns: &str,
    source: &str,
    starting_csv: Option<&str>,
) -> anyhow::Result<Installed> {
    let subscribed = Instant::now();
    let csv_name = starting_csv.unwrap_or(CSV);
    let mut spec = json!({
        "channel": CHANNEL, "name": PACKAGE,
        "source": source, "sourceNamespace": OLM_NAMESPACE,
        "installPlanApproval": "Manual",
    });
    if let Some(csv) = starting_csv {
        spec["startingCSV"] = json!(csv);
    }
    apply(
        &olm.subscriptions(ns),
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": PACKAGE, "namespace": ns},
            "spec": spec,
        }),
    )
    .await?;
    approve_install_plan(olm, ns, csv_name).await?;
    let csv = wait_csv_succeeded(olm, ns, csv_name).await?;
    ensure!(
        csv.data["status"]["reason"] == "InstallSucceeded",
        "{}",
        csv.data["status"]
    );
    let pod = operator_pod(&olm.client, ns).await?;
    let took = subscribed.elapsed();
    eprintln!(
        "OLM in {ns}: Subscription created -> operator Ready in {:.1}s",
        took.as_secs_f64()
    );
    // OLM ran the CSV's Deployment with the image built here.
    let image = first_image(&pod);
    ensure!(
        image.as_deref() == Some(images.cluster_operator.as_str()),
        "the operator runs {image:?}, not {}",
        images.cluster_operator
    );
    Ok(Installed { took, pod })
}

/// Uninstalls as OLM's documentation says (the Subscription, then the CSV) and waits until OLM
/// removed the operator's Deployment and the CSV (with its copies in other namespaces).
async fn unsubscribe(olm: &Olm, ns: &str, csv: &str) -> anyhow::Result<()> {
    olm.subscriptions(ns)
        .delete(PACKAGE, &DeleteParams::default())
        .await?;
    olm.csvs(ns).delete(csv, &DeleteParams::default()).await?;
    let deployments: Api<Deployment> = Api::namespaced(olm.client.clone(), ns);
    let copies = Api::<DynamicObject>::all_with(
        olm.client.clone(),
        &olm_resource(
            "v1alpha1",
            "ClusterServiceVersion",
            "clusterserviceversions",
        ),
    );
    // The old Subscription's InstallPlans too: one left behind (the garbage collector removes
    // it with its owner, a while later) can be taken up by the next Subscription of the same
    // CSV in this namespace, whose reference then dangles once it is collected.
    let plans = olm.install_plans(ns);
    plans
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    // What is left: the Deployment, the CSV's copies (by namespace), the InstallPlans.
    let left = || {
        let deployments = deployments.clone();
        let copies = copies.clone();
        let plans = plans.clone();
        async move {
            let csvs = copies
                .list(&ListParams::default().fields(&format!("metadata.name={csv}")))
                .await?;
            let plans = plans.list(&ListParams::default()).await?;
            let deployment = deployments.get_opt(DEPLOYMENT).await?.is_some();
            let copies: Vec<String> = csvs
                .items
                .iter()
                .filter_map(|c| c.metadata.namespace.clone())
                .collect();
            anyhow::Ok((deployment, copies, plans.items.len()))
        }
    };
    // In AllNamespaces mode OLM removes a copy from every namespace: after a full `make test`
    // there are many more of them than in a suite run alone, hence the install's wait.
    let gone = eventually(
        "OLM removes the operator's Deployment, the CSV and the InstallPlans",
        INSTALL_WAIT,
        || async {
            let (deployment, copies, plans) = left().await?;
            Ok((!deployment && copies.is_empty() && plans == 0).then_some(()))
        },
    )
    .await;
    if let Err(error) = gone {
        let (deployment, copies, plans) = left().await?;
        let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(olm.client.clone())
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
        return Err(error.context(format!(
            "uninstall from {ns}: Deployment left: {deployment}; CSV copies left in {} of \
             {namespaces} namespaces (first: {:?}); InstallPlans left: {plans}",
            copies.len(),
            copies.iter().take(5).collect::<Vec<_>>()
        )));
    }
    Ok(())
}

/// An `Infinispan` CR `name` with `replicas` small servers of the pod suites' version.
async fn apply_cluster(client: &Client, ns: &str, name: &str, replicas: i32) -> anyhow::Result<()> {
    let cr: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
        "metadata": {"name": name},
        "spec": {
            "version": SERVER_VERSION,
            "replicas": replicas,
            "container": {"resources": {
                "requests": {"cpu": "200m", "memory": "1Gi"},
                "limits": {"memory": "1Gi"},
            }},
        },
    }))?;
    Api::<Infinispan>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&cr),
        )
        .await?;
    Ok(())
}

/// Waits until the cluster's StatefulSet has `replicas` replicas (the operator reconciled the CR).
async fn wait_statefulset(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
) -> anyhow::Result<StatefulSet> {
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    eventually(
        &format!("StatefulSet {ns}/{name} with {replicas} replicas"),
        WAIT,
        || {
            let statefulsets = statefulsets.clone();
            async move {
                Ok(statefulsets
                    .get_opt(name)
                    .await?
                    .filter(|s| s.spec.replicas == Some(replicas)))
            }
        },
    )
    .await
}

/// A Cache CR `name` of cluster `cluster` (a local cache).
async fn apply_cache(client: &Client, ns: &str, cluster: &str, name: &str) -> anyhow::Result<()> {
    let cr: common_crds::Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
        "metadata": {"name": name, "labels": {CLUSTER_LABEL: cluster}},
        "spec": {"template": r#"{"local-cache":{"statistics":true}}"#},
    }))?;
    Api::<common_crds::Cache>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&cr),
        )
        .await?;
    Ok(())
}

/// Waits until the Cache CR `name` is `Ready=True, Synced` at its generation.
async fn wait_cache_synced(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let caches: Api<common_crds::Cache> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Cache {ns}/{name} Synced"), WAIT, || {
        let caches = caches.clone();
        async move {
            let Some(cr) = caches.get_opt(name).await? else {
                return Ok(None);
            };
            let status = cr.status.clone().unwrap_or_default();
            let synced = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "Synced");
            Ok((synced && status.observed_generation == cr.metadata.generation).then_some(()))
        }
    })
    .await
}

async fn wait_cluster_ready(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), ns);
    eventually(
        &format!("the Infinispan CR {ns}/{name} Ready=True"),
        CLUSTER_WAIT,
        || {
            let clusters = clusters.clone();
            async move {
                let cr = clusters.get(name).await?;
                let current = cr.status.as_ref().and_then(|s| s.observed_generation)
                    == cr.metadata.generation;
                Ok(
                    (current && matches!(condition(&cr, "Ready"), Some(("True", _, _))))
                        .then_some(()),
                )
            }
        },
    )
    .await
}

#[tokio::test]
async fn own_namespace_install_runs_a_cluster_that_survives_uninstall_and_is_adopted_on_reinstall()
-> anyhow::Result<()> {
    let _one = INSTALLS.lock().await;
    let (testbed, client, images, catalog) = olm_testbed().await?;
    let olm = Olm {
        client: client.clone(),
    };
    let ns = TestNamespace::create(&client, "olm-own").await?;
    let mut catalog_source = CatalogSourceGuard::new(&testbed, format!("infinispan-{}", ns.name));
    let source = catalog_source.name.clone();

    // The label policies go first, so that only the operator OLM installs can bring them back
    // (creating the shared one, whose parameter is a ConfigMap, takes `get` of every ConfigMap:
    // with the policies left by an earlier suite, a CSV without it passed here).
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    for name in label_policy_names() {
        for result in [
            policies
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
            bindings
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    ensure!(!label_policy_present(&client).await?);

    create_catalog_source(&olm, &source, &catalog).await?;
    create_operator_group(&olm, &ns.name, &[&ns.name]).await?;
    let Installed { pod, took } = subscribe(&olm, &images, &ns.name, &source, None).await?;
    let installed = Instant::now();
    ensure!(
        pod.annotations().get("olm.targetNamespaces") == Some(&ns.name),
        "olm.targetNamespaces: {:?}",
        pod.annotations().get("olm.targetNamespaces")
    );

    // The CSV's cluster permissions at work: the operator applied the label policy itself, and
    // the API server enforces it (a resource CR without its cluster label is refused).
    eventually("the operator applied the label policy", WAIT, || {
        let client = client.clone();
        async move { Ok(label_policy_present(&client).await?.then_some(())) }
    })
    .await?;
    let policy = policies.get(LABEL_POLICY_NAME).await?;
    ensure!(
        policy
            .managed_fields()
            .iter()
            .any(|f| f.manager.as_deref() == Some(CLUSTER_OPERATOR_FIELD_MANAGER)),
        "the label policy was not applied by the operator: {:?}",
        policy.managed_fields()
    );
    let caches: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &ApiResource::erase::<common_crds::Cache>(&()),
    );
    let unlabelled: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
        "metadata": {"name": "unlabelled"},
        "spec": {"template": "distributedCache:\n  mode: SYNC\n"},
    }))?;
    let refused = eventually("the label policy enforced", WAIT, || {
        let caches = caches.clone();
        let unlabelled = unlabelled.clone();
        async move {
            match caches.create(&PostParams::default(), &unlabelled).await {
                // Created before the API server loaded the policy: removed, tried again.
                Ok(_) => {
                    caches
                        .delete("unlabelled", &DeleteParams::default())
                        .await?;
                    Ok(None)
                }
                Err(kube::Error::Api(status)) => Ok(Some(status.message)),
                Err(other) => Err(other.into()),
            }
        }
    })
    .await?;
    ensure!(
        refused.contains(CLUSTER_LABEL),
        "refused for another reason: {refused}"
    );

    // A cluster: the operator OLM runs reconciles it into a StatefulSet whose server pod runs
    // the server image of the CSV's environment (the one built here) and becomes Ready.
    apply_cluster(&client, &ns.name, "olm", 1).await?;
    wait_statefulset(&client, &ns.name, "olm", 1).await?;
    let server = wait_ready(&client, &ns.name, "olm-0", CLUSTER_WAIT).await?;
    let server_image = first_image(&server);
    ensure!(
        server_image.as_deref() == Some(images.server.as_str()),
        "the server runs {server_image:?}, not {}",
        images.server
    );
    wait_cluster_ready(&client, &ns.name, "olm").await?;
    eprintln!(
        "OLM in {}: Subscription created -> first cluster Ready in {:.1}s",
        ns.name,
        (took + installed.elapsed()).as_secs_f64()
    );

    // Uninstalled (Subscription and CSV, as OLM's documentation says): the operator goes, the
    // user's CRDs, CR and running cluster stay.
    unsubscribe(&olm, &ns.name, CSV).await?;
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), &ns.name);
    ensure!(
        clusters.get_opt("olm").await?.is_some(),
        "the CR went with the operator"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let after = pods.get("olm-0").await?;
    ensure!(
        after.uid() == server.uid() && e2e::pods::is_ready(&after),
        "the server pod did not survive the uninstall"
    );

    // Installed again: the new operator adopts the cluster (it leaves the running pod alone and
    // applies the next change of the CR).
    subscribe(&olm, &images, &ns.name, &source, None).await?;
    let clusters_patch = json!({"spec": {"replicas": 0}});
    clusters
        .patch(
            "olm",
            &PatchParams::default(),
            &Patch::Merge(&clusters_patch),
        )
        .await?;
    wait_statefulset(&client, &ns.name, "olm", 0).await?;
    ensure!(
        pods.get_opt("olm-0")
            .await?
            .is_none_or(|p| p.uid() == server.uid()),
        "the server pod was replaced on re-install"
    );

    clusters.delete("olm", &DeleteParams::default()).await?;
    eventually("the cluster's CR gone", CLUSTER_WAIT, || {
        let clusters = clusters.clone();
        async move { Ok(clusters.get_opt("olm").await?.is_none().then_some(())) }
    })
    .await?;
    unsubscribe(&olm, &ns.name, CSV).await?;
    olm.catalog_sources()
        .delete(&source, &DeleteParams::default())
        .await?;
    catalog_source.deleted = true;
    ns.delete().await
}

/// The install modes, as OLM names them.
const MODES: [&str; 4] = [
    "OwnNamespace",
    "SingleNamespace",
    "MultiNamespace",
    "AllNamespaces",
];

/// Every install mode the CSV declares supported is one of [`MODES`], each of which the next
/// test installs with.
#[test]
fn the_csv_declares_the_install_modes_this_suite_installs_with() -> anyhow::Result<()> {
    let csv = std::fs::read_to_string(
        e2e::repo_root()
            .join("olm/bundle/manifests/infinispan-operator.clusterserviceversion.yaml"),
    )?;
    let csv: Value = serde_saphyr::from_str(&csv)?;
    let declared: Vec<&str> = csv["spec"]["installModes"]
        .as_array()
        .context("no installModes")?
        .iter()
        .filter(|m| m["supported"] == true)
        .filter_map(|m| m["type"].as_str())
        .collect();
    ensure!(
        declared == MODES,
        "the CSV declares {declared:?}; this suite installs with {MODES:?}"
    );
    Ok(())
}

/// Per install mode: the operator in namespace `op` with its OperatorGroup targeting (Own) `op`,
/// (Single) `a`, (Multi) `a` and `b`, (All) every namespace; a cluster (no servers) in each of
/// `op`, `a`, `b` and `outside` is reconciled (its StatefulSet) exactly where it is targeted.
#[tokio::test]
async fn every_install_mode_reconciles_the_target_namespaces_and_no_other() -> anyhow::Result<()> {
    let _one = INSTALLS.lock().await;
    let (testbed, client, images, catalog) = olm_testbed().await?;
    let olm = Olm {
        client: client.clone(),
    };
    let a = TestNamespace::create(&client, "olm-modes-a").await?;
    let b = TestNamespace::create(&client, "olm-modes-b").await?;
    let outside = TestNamespace::create(&client, "olm-modes-out").await?;
    let mut catalog_source = CatalogSourceGuard::new(&testbed, format!("infinispan-{}", a.name));
    let source = catalog_source.name.clone();
    create_catalog_source(&olm, &source, &catalog).await?;
    let statefulsets = |ns: &str| Api::<StatefulSet>::namespaced(client.clone(), ns);
    let mut report = Vec::new();
    for mode in MODES {
        // The operator's namespace is new for each mode. In one namespace kept across modes,
        // the second mode's Subscription (the same name, created again right after the
        // first's uninstall) once pointed at an InstallPlan that no longer existed, for
        // 300 s (CI, stop 35's make test): OLM had given it a plan the garbage collector then
        // removed, most likely one owned by the deleted Subscription of that name.
        let op = TestNamespace::create(&client, "olm-modes-op").await?;
        let all = [&op.name, &a.name, &b.name, &outside.name];
        let targets: Vec<&str> = match mode {
            "OwnNamespace" => vec![&op.name],
            "SingleNamespace" => vec![&a.name],
            "MultiNamespace" => vec![&a.name, &b.name],
            _ => vec![],
        };
        create_operator_group(&olm, &op.name, &targets).await?;
        let Installed { took, pod } = subscribe(&olm, &images, &op.name, &source, None)
            .await
            .with_context(|| format!("{mode}: install"))?;
        report.push(format!("{mode} {:.1}s", took.as_secs_f64()));
        ensure!(
            pod.annotations()
                .get("olm.targetNamespaces")
                .map(String::as_str)
                == Some(targets.join(",").as_str()),
            "{mode}: olm.targetNamespaces {:?}",
            pod.annotations().get("olm.targetNamespaces")
        );
        for ns in all {
            apply_cluster(&client, ns, "mode", 0).await?;
        }
        let watched = |ns: &str| targets.is_empty() || targets.contains(&ns);
        for ns in all.into_iter().filter(|ns| watched(ns)) {
            wait_statefulset(&client, ns, "mode", 0)
                .await
                .with_context(|| format!("{mode}: the cluster in the target namespace {ns}"))?;
        }
        // The targeted clusters are reconciled; the others have had the same time: none.
        for ns in all.into_iter().filter(|ns| !watched(ns)) {
            ensure!(
                statefulsets(ns).get_opt("mode").await?.is_none(),
                "{mode}: the cluster in {ns}, not a target namespace, was reconciled"
            );
        }
        for ns in all {
            Api::<Infinispan>::namespaced(client.clone(), ns)
                .delete("mode", &DeleteParams::default())
                .await?;
        }
        for ns in all {
            let clusters = Api::<Infinispan>::namespaced(client.clone(), ns);
            eventually(&format!("{mode}: the CR in {ns} gone"), WAIT, || {
                let clusters = clusters.clone();
                async move { Ok(clusters.get_opt("mode").await?.is_none().then_some(())) }
            })
            .await
            .or_else(|error| {
                // The operator holds the finalizer only where it watches: elsewhere, the CR
                // waits for no one once its finalizer (if any) is gone.
                if watched(ns) { Err(error) } else { Ok(()) }
            })?;
        }
        unsubscribe(&olm, &op.name, CSV)
            .await
            .with_context(|| format!("{mode}: uninstall"))?;
        op.delete().await?;
    }
    eprintln!(
        "OLM install modes, Subscription -> operator Ready: {}",
        report.join(", ")
    );
    olm.catalog_sources()
        .delete(&source, &DeleteParams::default())
        .await?;
    catalog_source.deleted = true;
    for ns in [a, b, outside] {
        ns.delete().await?;
    }
    Ok(())
}

/// Upgrade through a test catalog (`make images`: TESTBED_OLM_UPGRADE_CATALOG_IMAGE, the node's
/// bundle 0.1.0 and a 0.1.1 that replaces it in the channel): subscribed at 0.1.0 with manual
/// approval, OLM offers 0.1.1 in a second InstallPlan; approved, the 0.1.1 CSV succeeds, 0.1.0
/// goes, the operator's Deployment is OLM's 0.1.1 one, and the cluster made under 0.1.0 is
/// reconciled by it.
#[tokio::test]
async fn upgrade_from_0_1_0_to_0_1_1_through_a_test_catalog() -> anyhow::Result<()> {
    const NEXT: &str = "infinispan-operator.v0.1.1";
    let _one = INSTALLS.lock().await;
    let (testbed, client, images, _) = olm_testbed().await?;
    let path = testbed.run_dir.join("images.env");
    let catalog = parse_env_file(&std::fs::read_to_string(&path)?)
        .get("TESTBED_OLM_UPGRADE_CATALOG_IMAGE")
        .cloned()
        .with_context(|| {
            format!(
                "{} has no TESTBED_OLM_UPGRADE_CATALOG_IMAGE: run `make images`",
                path.display()
            )
        })?;
    let olm = Olm {
        client: client.clone(),
    };
    let ns = TestNamespace::create(&client, "olm-upgrade").await?;
    let mut catalog_source = CatalogSourceGuard::new(&testbed, format!("infinispan-{}", ns.name));
    let source = catalog_source.name.clone();
    create_catalog_source(&olm, &source, &catalog).await?;
    create_operator_group(&olm, &ns.name, &[&ns.name]).await?;
    let Installed { pod: first, .. } =
        subscribe(&olm, &images, &ns.name, &source, Some(CSV)).await?;
    // A running cluster with a Cache CR synced to its server, under 0.1.0.
    apply_cluster(&client, &ns.name, "upgrade", 1).await?;
    wait_cluster_ready(&client, &ns.name, "upgrade").await?;
    apply_cache(&client, &ns.name, "upgrade", "orders").await?;
    wait_cache_synced(&client, &ns.name, "orders").await?;
    let server_pod = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("upgrade-0")
        .await?
        .uid();

    // OLM offers the channel's next version in a new InstallPlan, which waits for approval.
    let upgrading = Instant::now();
    approve_install_plan(&olm, &ns.name, NEXT).await?;
    let csv = wait_csv_succeeded(&olm, &ns.name, NEXT).await?;
    ensure!(
        csv.data["spec"]["replaces"] == CSV,
        "{NEXT} replaces {}",
        csv.data["spec"]["replaces"]
    );
    let csvs = olm.csvs(&ns.name);
    eventually(&format!("{CSV} replaced and removed"), WAIT, || {
        let csvs = csvs.clone();
        async move { Ok(csvs.get_opt(CSV).await?.is_none().then_some(())) }
    })
    .await?;
    let subscription = olm.subscriptions(&ns.name).get(PACKAGE).await?;
    ensure!(
        subscription.data["status"]["installedCSV"] == NEXT,
        "the Subscription has installed {}",
        subscription.data["status"]["installedCSV"]
    );
    // The operator's Deployment is now the 0.1.1 CSV's: a new pod, Ready.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let deployment = deployments.get(DEPLOYMENT).await?;
    ensure!(
        deployment
            .owner_references()
            .iter()
            .any(|o| o.kind == "ClusterServiceVersion" && o.name == NEXT),
        "the Deployment belongs to {:?}",
        deployment.owner_references()
    );
    let pod = eventually("the 0.1.1 operator's pod", INSTALL_WAIT, || {
        let client = client.clone();
        let ns = ns.name.clone();
        let first = first.uid();
        async move {
            let pod = operator_pod(&client, &ns).await?;
            Ok((pod.uid() != first).then_some(pod))
        }
    })
    .await?;
    ensure!(
        pod.annotations().get("olm.operatorGroup").is_some(),
        "{:?}",
        pod.annotations()
    );
    eprintln!(
        "OLM upgrade {CSV} -> {NEXT}: InstallPlan approved -> new operator Ready in {:.1}s",
        upgrading.elapsed().as_secs_f64()
    );
    // The server pod was not restarted (0.1.1 changes nothing of it), the user's cache and its
    // CR are untouched, and the sync goes on: a cache created on the server by another client
    // becomes a mirror CR.
    let resumed = Instant::now();
    let cluster = Api::<Infinispan>::namespaced(client.clone(), &ns.name)
        .get("upgrade")
        .await?;
    let rest = e2e::pods::rest_client(&client, &ns.name, &cluster).await?;
    rest.create_cache(
        "after-upgrade",
        &infinispan_rest::ConfigDocument::json(r#"{"local-cache":{}}"#),
        Default::default(),
    )
    .await?;
    wait_cache_synced(
        &client,
        &ns.name,
        &common_crds::naming::mirror_name("upgrade", "after-upgrade"),
    )
    .await?;
    let resumed = resumed.elapsed();
    eprintln!(
        "OLM upgrade: a server change reached its CR {:.1}s after the new operator was Ready",
        resumed.as_secs_f64()
    );
    ensure!(
        resumed < Duration::from_secs(60),
        "the sync resumed after {resumed:?}"
    );
    let pod_now = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("upgrade-0")
        .await?
        .uid();
    ensure!(
        pod_now == server_pod,
        "the server pod was restarted by the upgrade"
    );
    ensure!(
        rest.cache_exists("orders").await?,
        "the user's cache is gone from the server"
    );
    wait_cache_synced(&client, &ns.name, "orders").await?;
    // The cluster made under 0.1.0 is reconciled by the 0.1.1 operator: a change of its spec
    // reaches the StatefulSet and the CR's observed generation.
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), &ns.name);
    let changed = clusters
        .patch(
            "upgrade",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"container": {"resources": {"requests": {"cpu": "100m"}}}}}),
            ),
        )
        .await?;
    let generation = changed.metadata.generation;
    eventually("the 0.1.1 operator observed the change", WAIT, || {
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("upgrade").await?;
            Ok(
                (cr.status.as_ref().and_then(|s| s.observed_generation) == generation)
                    .then_some(()),
            )
        }
    })
    .await?;
    let statefulset = wait_statefulset(&client, &ns.name, "upgrade", 1).await?;
    let cpu = statefulset
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone());
    ensure!(
        cpu.as_deref() == Some("100m"),
        "the StatefulSet asks for cpu {cpu:?}"
    );

    Api::<Infinispan>::namespaced(client.clone(), &ns.name)
        .delete("upgrade", &DeleteParams::default())
        .await?;
    unsubscribe(&olm, &ns.name, NEXT).await?;
    olm.catalog_sources()
        .delete(&source, &DeleteParams::default())
        .await?;
    catalog_source.deleted = true;
    ns.delete().await
}

/// `make demo-olm` in CI mode (`e2e/demo-olm.sh --ci`): the install a user follows (a
/// CatalogSource, an OperatorGroup and a Subscription with automatic approval, the CSV, an
/// `Infinispan` CR, a Cache CR synced to the server), every check fatal, everything removed at
/// the end. Its fixed namespaces (`demo-olm`, `infinispan-operator-olm`) are used by no other test.
#[tokio::test]
async fn make_demo_olm_runs_to_completion_in_ci_mode() -> anyhow::Result<()> {
    let _one = INSTALLS.lock().await;
    let (testbed, ..) = olm_testbed().await?;
    let log = e2e::repo_root().join("target/e2e-logs/demo-olm.log");
    std::fs::create_dir_all(log.parent().context("a parent")?)?;
    let output = std::fs::File::create(&log)?;
    let mut command = std::process::Command::new(e2e::repo_root().join("e2e/demo-olm.sh"));
    e2e::without_crate_variables(&mut command);
    let status = command
        .arg("--ci")
        .env("TESTBED_RUN_DIR", &testbed.run_dir)
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone()?)
        .stderr(output)
        .status()?;
    let output = std::fs::read_to_string(&log)?;
    ensure!(
        status.success(),
        "e2e/demo-olm.sh --ci failed ({status}); its output ({}):\n{output}",
        log.display()
    );
    for check in [
        "ok the CatalogSource is READY",
        "ok OLM resolved the Subscription, unpacked the bundle and installed the CSV: Succeeded",
        "ok the cluster operator's Deployment is Available",
        "ok the Infinispan CR is Ready",
        "ok Cache orders is Ready",
        "CI mode: every check passed",
    ] {
        ensure!(
            output.contains(check),
            "the demo's output lacks '{check}' ({}):\n{output}",
            log.display()
        );
    }
    Ok(())
}

/// `operator-sdk scorecard` on `olm/bundle`, its tests running as pods on the node from images
/// built here (`make images`: the scorecard-test command of the operator-sdk version the testbed
/// builds, and a busybox image for its untar and storage containers), restricted Pod Security:
/// the basic suite and the olm suite: every test passes (`olm-spec-descriptors` matches
/// top-level spec paths: the `service` and `resourcesOperator` objects of the Infinispan example
/// have descriptors of their own, shown as advanced groups, besides their fields').
#[tokio::test]
async fn operator_sdk_scorecard_runs_here_and_passes() -> anyhow::Result<()> {
    let (testbed, client, ..) = olm_testbed().await?;
    let vars = parse_env_file(&std::fs::read_to_string(
        testbed.run_dir.join("images.env"),
    )?);
    let image = |name: &str| {
        vars.get(name)
            .cloned()
            .with_context(|| format!("images.env has no {name}: run `make images`"))
    };
    let (test_image, untar_image) = (
        image("TESTBED_SCORECARD_TEST_IMAGE")?,
        image("TESTBED_SCORECARD_UNTAR_IMAGE")?,
    );
    let tests = [
        ("basic", "basic-check-spec"),
        ("olm", "olm-bundle-validation"),
        ("olm", "olm-crds-have-validation"),
        ("olm", "olm-crds-have-resources"),
        ("olm", "olm-spec-descriptors"),
        ("olm", "olm-status-descriptors"),
    ];
    let config = json!({
        "apiVersion": "scorecard.operatorframework.io/v1alpha3",
        "kind": "Configuration",
        "metadata": {"name": "config"},
        "stages": [{
            "parallel": true,
            "tests": tests.iter().map(|(suite, test)| json!({
                "entrypoint": ["scorecard-test", test],
                "image": test_image,
                "labels": {"suite": suite, "test": format!("{test}-test")},
            })).collect::<Vec<_>>(),
        }],
    });
    let dir = e2e::repo_root().join("target/e2e-logs/scorecard");
    std::fs::create_dir_all(&dir)?;
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, serde_json::to_vec_pretty(&config)?)?;
    let ns = TestNamespace::create(&client, "olm-scorecard").await?;
    let output = tokio::process::Command::new(testbed.run_dir.join("bin/operator-sdk"))
        .arg("scorecard")
        .arg(e2e::repo_root().join("olm/bundle"))
        .arg("--config")
        .arg(&config_path)
        .args(["--namespace", &ns.name, "--untar-image", &untar_image])
        .args([
            "--storage-image",
            &untar_image,
            "--pod-security",
            "restricted",
        ])
        .args(["--wait-time", "180s", "--output", "json"])
        .env("KUBECONFIG", &testbed.kubeconfig)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("running operator-sdk scorecard")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    std::fs::write(dir.join("result.json"), stdout.as_bytes())?;
    let result: Value = serde_json::from_str(&stdout).with_context(|| {
        format!(
            "operator-sdk scorecard printed no JSON ({}):\n{}\n{stdout}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let mut states = std::collections::BTreeMap::new();
    for item in result["items"].as_array().context("no items")? {
        for test in item["status"]["results"].as_array().context("no results")? {
            let name = test["name"].as_str().context("a result without name")?;
            let mut errors: Vec<String> = test["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect();
            errors.sort();
            states.insert(name.to_string(), (test["state"].clone(), errors));
        }
    }
    let names: Vec<&str> = states.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = tests.iter().map(|(_, test)| *test).collect();
    expected.sort_unstable();
    ensure!(names == expected, "scorecard ran {names:?}");
    for (name, (state, errors)) in &states {
        ensure!(state == "pass", "{name}: {state} {errors:?}");
    }
    ns.delete().await
}
