//! End-to-end: the resources operator under its own least-privilege identity (design
//! "Security by default"). The fixture runs the real binary as the ServiceAccount
//! `resources-operator-<cluster>` bound to the Role of `common_crds::rbac`, on an API server
//! that enforces RBAC and `OwnerReferencesPermissionEnforcement`:
//!
//! - the identity may do what the operator needs, and nothing more: not read other Secrets, not
//!   touch another namespace, not change or delete its Infinispan CR (SubjectAccessReviews as the
//!   admin, SelfSubjectAccessReviews and real requests as the account);
//! - the operator started with it syncs both ways: a Cache CR becomes a server cache (K1), a
//!   server cache becomes a mirror CR owned by the Infinispan CR (S1), with no request refused.
//!
//! The whole `cache_sync` suite runs under the same identity.

use anyhow::{Context, ensure};
use common_crds::labels::API_GROUP;
use common_crds::rbac;
use common_crds::{Cache, Infinispan};
use e2e::eventually;
use e2e::identity::OperatorIdentity;
use e2e::operator::*;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const LEASES: &str = "coordination.k8s.io";
const EVENTS: &str = "events.k8s.io";
const CORE: &str = "";

/// A Secret of the test namespace the operator has no business reading.
const OTHER_SECRET: &str = "someone-elses-secret";

fn identity(f: &Fixture) -> anyhow::Result<OperatorIdentity> {
    f.identity
        .clone()
        .context("the fixture's operator runs as the admin")
}

/// (group, resource, verb, name) the operator needs in its namespace.
fn needed() -> Vec<(&'static str, String, &'static str, Option<String>)> {
    let lease = rbac::leader_lease_name(CLUSTER);
    let mut needed = Vec::new();
    for plural in ["caches", "templates", "counters", "schemas", "tasks"] {
        for verb in rbac::RESOURCE_VERBS {
            let name = matches!(verb, "get" | "update" | "patch" | "delete")
                .then(|| "some-cr".to_string());
            needed.push((API_GROUP, plural.to_string(), verb, name));
        }
        for verb in rbac::STATUS_VERBS {
            needed.push((
                API_GROUP,
                format!("{plural}/status"),
                verb,
                Some("some-cr".to_string()),
            ));
        }
    }
    for verb in ["get", "list", "watch"] {
        // list and watch with the field selector metadata.name=<cluster>.
        needed.push((API_GROUP, "infinispans".into(), verb, Some(CLUSTER.into())));
    }
    needed.push((
        API_GROUP,
        "infinispans/finalizers".into(),
        "update",
        Some(CLUSTER.into()),
    ));
    needed.push((CORE, "secrets".into(), "get", Some(SECRET.into())));
    needed.push((EVENTS, "events".into(), "create", None));
    needed.push((EVENTS, "events".into(), "patch", Some("some-event".into())));
    needed.push((LEASES, "leases".into(), "get", Some(lease.clone())));
    needed.push((LEASES, "leases".into(), "update", Some(lease)));
    needed.push((LEASES, "leases".into(), "create", None));
    needed
}

/// (group, resource, verb, name) the operator must not be able to do in its namespace.
fn refused() -> Vec<(&'static str, &'static str, &'static str, Option<String>)> {
    let lease = rbac::leader_lease_name(CLUSTER);
    let account = rbac::resources_operator_name(CLUSTER);
    let rows: Vec<(&str, &str, &str, Option<&str>)> = vec![
        // Other Secrets, and Secrets in bulk.
        (CORE, "secrets", "get", Some(OTHER_SECRET)),
        (CORE, "secrets", "list", None),
        (CORE, "secrets", "watch", None),
        (CORE, "secrets", "update", Some(SECRET)),
        (CORE, "secrets", "create", None),
        // Its Infinispan CR: read only; other clusters not at all.
        (API_GROUP, "infinispans", "delete", Some(CLUSTER)),
        (API_GROUP, "infinispans", "update", Some(CLUSTER)),
        (API_GROUP, "infinispans", "patch", Some(CLUSTER)),
        (API_GROUP, "infinispans", "create", None),
        (API_GROUP, "infinispans", "list", None),
        (API_GROUP, "infinispans", "watch", None),
        (API_GROUP, "infinispans", "get", Some("other-cluster")),
        (API_GROUP, "infinispans/status", "patch", Some(CLUSTER)),
        (
            API_GROUP,
            "infinispans/finalizers",
            "update",
            Some("other-cluster"),
        ),
        // The cluster operator's kinds.
        (API_GROUP, "backups", "create", None),
        (API_GROUP, "restores", "list", None),
        (API_GROUP, "caches", "deletecollection", None),
        // Other Leases, and deleting its own.
        (LEASES, "leases", "get", Some("other-lease")),
        (LEASES, "leases", "update", Some("other-lease")),
        (LEASES, "leases", "delete", Some(&lease)),
        // Nothing of the workload or of RBAC.
        (CORE, "pods", "list", None),
        (CORE, "pods/exec", "create", Some("demo-0")),
        (CORE, "configmaps", "get", Some("anything")),
        (CORE, "serviceaccounts/token", "create", Some(&account)),
        (CORE, "events", "create", None),
        ("rbac.authorization.k8s.io", "roles", "create", None),
        ("rbac.authorization.k8s.io", "rolebindings", "create", None),
        (
            "rbac.authorization.k8s.io",
            "roles",
            "escalate",
            Some(&account),
        ),
        ("apps", "deployments", "list", None),
    ];
    rows.into_iter()
        .map(|(group, resource, verb, name)| (group, resource, verb, name.map(str::to_string)))
        .collect()
}

/// The operator's identity may do exactly what the operator needs: every rule it relies on is
/// granted in its namespace; other Secrets, another namespace, writes to its Infinispan CR and
/// anything cluster-scoped are refused. Checked by the API server's authorizer itself
/// (SubjectAccessReview as the admin, SelfSubjectAccessReview as the account) and with real
/// requests as the account.
#[tokio::test]
async fn the_identity_grants_what_the_operator_needs_and_nothing_else() -> anyhow::Result<()> {
    with_options_fixture("rbac-review", Options::default(), async |f| {
        let identity = identity(f)?;
        ensure!(
            f.launch.kubeconfig == identity.kubeconfig,
            "the operator runs as another identity"
        );
        ensure!(f.launch.kubeconfig != f.testbed.kubeconfig);
        ensure!(identity.service_account == rbac::resources_operator_name(CLUSTER));
        let admin = &f.client;
        let account = identity.client().await?;

        // The kubeconfig's token authenticates as the account.
        let whoami = Api::<SelfSubjectReview>::all(account.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        let user = whoami
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .context("SelfSubjectReview without a user name")?;
        ensure!(user == identity.user(), "authenticated as {user}");

        let mut wrong = Vec::new();
        for (group, resource, verb, name) in needed() {
            if !identity
                .can(admin, group, &resource, verb, name.as_deref())
                .await?
            {
                wrong.push(format!("refused: {verb} {group}/{resource} {name:?}"));
            }
        }
        for (group, resource, verb, name) in refused() {
            if identity
                .can(admin, group, resource, verb, name.as_deref())
                .await?
            {
                wrong.push(format!("allowed: {verb} {group}/{resource} {name:?}"));
            }
        }
        // Another namespace: nothing there, not even what it may do at home.
        for namespace in ["default", "kube-system"] {
            for (group, resource, verb, name) in needed() {
                if identity
                    .can_in(admin, namespace, group, &resource, verb, name.as_deref())
                    .await?
                {
                    wrong.push(format!(
                        "allowed in {namespace}: {verb} {group}/{resource} {name:?}"
                    ));
                }
            }
        }
        // Cluster-scoped: nothing.
        for (group, resource, verb) in [
            (CORE, "namespaces", "list"),
            (CORE, "nodes", "list"),
            ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
            ("rbac.authorization.k8s.io", "clusterroles", "create"),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies",
                "list",
            ),
        ] {
            if identity
                .can_in(admin, "", group, resource, verb, None)
                .await?
            {
                wrong.push(format!("allowed cluster-wide: {verb} {group}/{resource}"));
            }
        }
        ensure!(
            wrong.is_empty(),
            "{} wrong answers:\n{}",
            wrong.len(),
            wrong.join("\n")
        );

        // The same authorizer asked by the account itself.
        for (verb, name, expected) in [
            ("get", Some(SECRET), true),
            ("get", Some(OTHER_SECRET), false),
            ("list", None, false),
        ] {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        namespace: Some(f.ns.name.clone()),
                        resource: Some("secrets".to_string()),
                        verb: Some(verb.to_string()),
                        name: name.map(str::to_string),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let allowed = Api::<SelfSubjectAccessReview>::all(account.clone())
                .create(&PostParams::default(), &review)
                .await?
                .status
                .is_some_and(|s| s.allowed);
            ensure!(
                allowed == expected,
                "SelfSubjectAccessReview {verb} secrets {name:?}: {allowed}"
            );
        }

        // Real requests as the account.
        let secret: Secret = serde_json::from_value(json!({
            "metadata": { "name": OTHER_SECRET },
            "stringData": { "password": "not for the operator" },
        }))?;
        Api::<Secret>::namespaced(admin.clone(), &f.ns.name)
            .create(&PostParams::default(), &secret)
            .await?;
        let secrets = Api::<Secret>::namespaced(account.clone(), &f.ns.name);
        ensure!(
            secrets.get(SECRET).await.is_ok(),
            "cannot read its credentials"
        );
        ensure_forbidden(secrets.get(OTHER_SECRET).await, "get another Secret")?;
        ensure_forbidden(secrets.list(&ListParams::default()).await, "list Secrets")?;

        let clusters = Api::<Infinispan>::namespaced(account.clone(), &f.ns.name);
        ensure!(
            clusters.get(CLUSTER).await.is_ok(),
            "cannot read its Infinispan CR"
        );
        let own = clusters
            .list(&ListParams::default().fields(&format!("metadata.name={CLUSTER}")))
            .await
            .context("list of its Infinispan CR by field selector")?;
        ensure!(
            own.items.len() == 1,
            "{} Infinispan CRs listed",
            own.items.len()
        );
        ensure_forbidden(
            clusters.list(&ListParams::default()).await,
            "list every Infinispan CR",
        )?;
        ensure_forbidden(
            clusters.delete(CLUSTER, &DeleteParams::default()).await,
            "delete its Infinispan CR",
        )?;

        let elsewhere = Api::<Cache>::namespaced(account.clone(), "default");
        ensure_forbidden(
            elsewhere.list(&ListParams::default()).await,
            "list Caches elsewhere",
        )?;
        ensure_forbidden(
            Api::<Secret>::namespaced(account.clone(), "default")
                .list(&ListParams::default())
                .await,
            "list Secrets elsewhere",
        )?;
        Ok(())
    })
    .await
}

/// The operator under its own identity syncs both ways: K1 (a Cache CR creates the server
/// cache) and S1 (a server cache appears as a mirror CR owned by the Infinispan CR, which
/// `OwnerReferencesPermissionEnforcement` checks), and the API server refuses none of its
/// requests.
#[tokio::test]
async fn the_operator_syncs_both_ways_under_its_own_identity() -> anyhow::Result<()> {
    with_options_fixture("rbac-sync", Options::default(), async |f| {
        let identity = identity(f)?;
        ensure!(f.launch.kubeconfig == identity.kubeconfig);

        // K1.
        let k1 = f.server_name("rbac-k1");
        f.apply_cache(&k1, r#"{"local-cache":{"statistics":true}}"#)
            .await?;
        let cr = f.wait_ready(&k1, "Synced").await?;
        ensure!(f.rest.cache_exists(&k1).await?, "no server cache {k1}");
        ensure!(
            cr.finalizers()
                .iter()
                .any(|x| x == common_crds::labels::RESOURCES_FINALIZER),
            "no finalizer on {k1}"
        );

        // S1.
        let s1 = f.server_name("rbac-s1");
        f.create_on_server(&s1, r#"{"local-cache":{"statistics":false}}"#)
            .await?;
        let f = &*f;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &s1);
        let mirror = mirror.as_str();
        let cr = eventually(&format!("mirror CR {mirror}"), SLOW, || async move {
            Ok(f.caches.get_opt(mirror).await?)
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        let owner = cr.owner_references().first().context("no owner")?;
        ensure!(
            owner.kind == "Infinispan" && owner.name == CLUSTER,
            "{owner:?}"
        );
        f.wait_ready(mirror, "Synced").await?;

        // K3 under the identity too: deleting the CR deletes the server cache.
        f.caches.delete(&k1, &DeleteParams::default()).await?;
        f.wait_gone(&k1).await?;
        f.wait_server(&k1, false).await?;

        let refused = f.operator.log_lines(&["forbidden"]);
        ensure!(
            refused == 0,
            "{}",
            f.operator.with_log(anyhow::anyhow!(
                "{refused} refused requests in the operator log"
            ))
        );
        Ok(())
    })
    .await
}

/// A test that needs it may still run the operator as the testbed's admin.
#[tokio::test]
async fn a_test_may_run_the_operator_as_the_admin() -> anyhow::Result<()> {
    let options = Options {
        identity: Identity::Admin,
        ..Options::default()
    };
    with_options_fixture("rbac-admin", options, async |f| {
        ensure!(f.identity.is_none());
        ensure!(f.launch.kubeconfig == f.testbed.kubeconfig);
        let name = f.server_name("rbac-admin");
        f.apply_cache(&name, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&name, "Synced").await?;
        Ok(())
    })
    .await
}

/// A request the API server refused with 403.
fn ensure_forbidden<T>(result: Result<T, kube::Error>, what: &str) -> anyhow::Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        Err(error) => Err(anyhow::anyhow!("{what}: expected 403, got {error}")),
        Ok(_) => Err(anyhow::anyhow!("{what}: allowed")),
    }
}
