//! A cluster served by its namespace's shared resources operator
//! (`spec.resourcesOperator.deployment: SharedInNamespace`, see [`common_crds::shared`]).
//!
//! Per cluster ([`member`]): the cluster's Role (its own rules, `secrets` narrowed to the
//! Secrets the member reads through the API) and RoleBinding to the shared ServiceAccount, both
//! controlled by the CR as in per-cluster mode, and the cluster's entry in the members
//! ConfigMap. Per namespace ([`shared_objects`]): the shared operator's ServiceAccount, Role,
//! RoleBinding and Deployment, without an owner (they serve several CRs; the cluster operator
//! deletes them when the last member leaves). They take the operator's settings (image, pull
//! Secrets, default resources), never a CR's: no member decides for the others.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::ResourcesOperatorScheduling;
use common_crds::rbac;
use common_crds::shared::{Member, SHARED_NAME, SecretKey};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use sha2::{Digest, Sha256};

use super::connection::Connection;
use super::deployment::{container, default_resources, pod_spec};
use super::{BuildError, COMPONENT, Identity, METRICS_PORT, PART_OF, SERVER_CA_KEY, Settings};
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;

/// `app.kubernetes.io/name` of the shared operator's objects (not the per-cluster operators'
/// name: their selectors must never overlap).
pub const SHARED_APP_NAME: &str = "infinispan-shared-resources-operator";

/// What one member cluster asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberObjects {
    /// The cluster's Role, as a per-cluster operator's with `secrets` narrowed to
    /// [`Member::secrets`].
    pub role: Role,
    /// The cluster's RoleBinding, to the shared ServiceAccount.
    pub role_binding: RoleBinding,
    /// The cluster's entry in the members ConfigMap.
    pub entry: Member,
    /// The namespace's shared operator.
    pub shared: SharedObjects,
}

/// The namespace's shared operator.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedObjects {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub deployment: Deployment,
}

/// Everything member `cluster` asks for.
pub fn member(cluster: &Infinispan, settings: &Settings) -> Result<MemberObjects, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let entry = entry(cluster, settings)?;
    let mut role = rbac::member_role(id.scope(), &entry.secrets());
    id.own(&mut role.metadata);
    let mut role_binding = rbac::member_role_binding(id.scope(), &[SHARED_NAME]);
    id.own(&mut role_binding.metadata);
    Ok(MemberObjects {
        role,
        role_binding,
        entry,
        shared: shared_objects(id.namespace, settings)?,
    })
}

/// The cluster's entry: its connection (URL, Secrets, TLS server name), its settings, and a revision of what
/// the member reads once at its start (the credentials' and the client certificate's).
pub fn entry(cluster: &Infinispan, settings: &Settings) -> Result<Member, BuildError> {
    let connection = Connection::of(cluster, settings)?;
    let spec = &cluster.spec.resources_operator;
    let client_certificate = connection.client_certificate;
    let revision = {
        let mut hasher = Sha256::new();
        for part in [
            settings.credentials_revision.as_deref(),
            client_certificate.map(|c| c.revision.as_str()),
        ] {
            hasher.update(part.unwrap_or_default());
            hasher.update([0]);
        }
        let digest = hasher.finalize();
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    };
    Ok(Member {
        infinispan_url: connection.url,
        credentials_secret: connection.credentials_secret.map(str::to_string),
        ca_secret: connection.ca_secret.map(|name| SecretKey {
            name,
            key: SERVER_CA_KEY.to_string(),
        }),
        tls_server_name: connection.tls_server_name,
        client_certificate_secret: client_certificate.map(|c| c.secret.clone()),
        drift_check_interval: spec.drift_check_interval.clone(),
        server_write_concurrency: spec.server_write_concurrency,
        revision: Some(revision),
    })
}

/// The members ConfigMap as member `cluster` applies it (its own field manager): its key
/// alone, or no key when `entry` is `None` (the member leaves).
pub fn members_config_map(namespace: &str, cluster: &str, entry: Option<&Member>) -> ConfigMap {
    ConfigMap {
        metadata: metadata(namespace),
        data: entry.map(|entry| BTreeMap::from([(cluster.to_string(), entry.to_value())])),
        ..ConfigMap::default()
    }
}

/// The field manager member `cluster` applies its key of the members ConfigMap with: one per
/// cluster, so that applying one key never removes another's.
pub fn member_field_manager(cluster: &str) -> String {
    format!("{CLUSTER_OPERATOR_FIELD_MANAGER}/{cluster}")
}

/// The namespace's shared operator: `run-shared` with leader election, as the operator's
/// settings say.
pub fn shared_objects(namespace: &str, settings: &Settings) -> Result<SharedObjects, BuildError> {
    if settings.image.trim().is_empty() {
        return Err(BuildError::MissingImage);
    }
    let own = |mut meta: ObjectMeta| {
        meta.labels = Some(labels());
        meta
    };
    let mut service_account = rbac::shared_service_account(namespace);
    service_account.metadata = own(service_account.metadata);
    let mut role = rbac::shared_role(namespace);
    role.metadata = own(role.metadata);
    let mut role_binding = rbac::shared_role_binding(namespace);
    role_binding.metadata = own(role_binding.metadata);
    let args = vec![
        "run-shared".to_string(),
        format!("--namespace={namespace}"),
        format!("--members-config={SHARED_NAME}"),
        format!("--metrics-address=0.0.0.0:{METRICS_PORT}"),
        "--leader-election=true".to_string(),
    ];
    let container = container(
        settings.image.clone(),
        args,
        Vec::new(),
        default_resources(),
    );
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(pod_spec(
            SHARED_NAME.to_string(),
            container,
            Vec::new(),
            &settings.image_pull_secrets,
            ResourcesOperatorScheduling::default(),
        )),
    };
    let deployment = Deployment {
        metadata: metadata(namespace),
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector_labels()),
                match_expressions: None,
            },
            template,
            ..DeploymentSpec::default()
        },
        status: None,
    };
    Ok(SharedObjects {
        service_account,
        role,
        role_binding,
        deployment,
    })
}

/// The name, namespace and labels of a shared object.
fn metadata(namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(SHARED_NAME.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

/// The shared operator's selector, which never changes.
pub fn selector_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            SHARED_APP_NAME.to_string(),
        ),
        (
            "app.kubernetes.io/instance".to_string(),
            SHARED_NAME.to_string(),
        ),
    ])
}

/// The labels of the shared objects and pods.
pub fn labels() -> BTreeMap<String, String> {
    let mut labels = selector_labels();
    labels.extend(
        [
            ("app.kubernetes.io/component", COMPONENT),
            ("app.kubernetes.io/part-of", PART_OF),
            (
                "app.kubernetes.io/managed-by",
                CLUSTER_OPERATOR_FIELD_MANAGER,
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    labels
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::build::test_support::{assert_restricted, controlled_by};
    use common_crds::infinispan::ResourcesOperatorDeployment;
    use serde_json::json;

    fn shared_cluster() -> Infinispan {
        let mut cr = cluster("demo", "team-a");
        cr.spec.resources_operator.deployment = ResourcesOperatorDeployment::SharedInNamespace;
        cr
    }

    #[test]
    fn a_member_gets_its_role_bound_to_the_shared_account_and_an_entry() -> anyhow::Result<()> {
        let cr = shared_cluster();
        let objects = member(&cr, &settings())?;
        let owner = Some(vec![controlled_by("demo", UID)]);
        assert_eq!(objects.role.metadata.owner_references, owner);
        assert_eq!(objects.role_binding.metadata.owner_references, owner);
        assert_eq!(
            objects.role.metadata.name.as_deref(),
            Some("resources-operator-demo")
        );
        let subjects = objects.role_binding.subjects.clone().unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].name, SHARED_NAME);
        assert_eq!(
            objects.entry.infinispan_url,
            "http://demo-operator.team-a.svc.cluster.local:11222"
        );
        assert_eq!(
            objects.entry.credentials_secret.as_deref(),
            Some(settings().credentials_secret.as_str())
        );
        assert_eq!(objects.entry.ca_secret, None);
        assert_eq!(objects.entry.tls_server_name, None);
        // The shared objects: no owner, the operator's image, run-shared.
        let deployment = &objects.shared.deployment;
        assert_eq!(deployment.metadata.owner_references, None);
        let pod = deployment.spec.template.spec.clone().unwrap_or_default();
        assert_eq!(pod.service_account_name.as_deref(), Some(SHARED_NAME));
        let args = pod.containers[0].args.clone().unwrap_or_default();
        assert_eq!(args[0], "run-shared");
        assert!(args.contains(&"--namespace=team-a".to_string()), "{args:?}");
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some(settings().image.as_str())
        );
        Ok(())
    }

    #[test]
    fn the_entry_carries_the_tls_material_and_a_revision_that_moves_with_it() -> anyhow::Result<()>
    {
        let cr: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
            "metadata": {"name": "demo", "namespace": "team-a", "uid": UID},
            "spec": {
                "security": {"endpointEncryption": {"type": "Secret", "certSecretName": "demo-tls", "clientCert": "Validate"}},
                "resourcesOperator": {"deployment": "SharedInNamespace", "serverWriteConcurrency": 8},
            },
        }))?;
        let mut settings = settings();
        settings.server_ca = true;
        settings.credentials_revision = Some("one".into());
        settings.client_certificate = Some(super::super::ClientCertificate {
            secret: "demo-operator-client".into(),
            revision: "r1".into(),
        });
        let entry = entry(&cr, &settings)?;
        assert!(entry.infinispan_url.starts_with("https://"), "{entry:?}");
        assert_eq!(
            entry.ca_secret,
            Some(SecretKey {
                name: "demo-tls".into(),
                key: "ca.crt".into()
            })
        );
        assert_eq!(
            entry.client_certificate_secret.as_deref(),
            Some("demo-operator-client")
        );
        assert_eq!(
            entry.tls_server_name.as_deref(),
            Some("demo.team-a.svc.cluster.local")
        );
        assert_eq!(entry.server_write_concurrency, Some(8));
        assert_eq!(
            entry.secrets(),
            [
                "demo-operator-client",
                "demo-operator-credentials",
                "demo-tls"
            ]
        );
        let mut rotated = settings.clone();
        rotated.credentials_revision = Some("two".into());
        assert_ne!(super::entry(&cr, &rotated)?.revision, entry.revision);
        let mut renewed = settings.clone();
        renewed.client_certificate = Some(super::super::ClientCertificate {
            secret: "demo-operator-client".into(),
            revision: "r2".into(),
        });
        assert_ne!(super::entry(&cr, &renewed)?.revision, entry.revision);
        assert_eq!(super::entry(&cr, &settings)?.revision, entry.revision);
        Ok(())
    }

    #[test]
    fn a_members_config_map_has_its_key_alone_and_none_to_leave() {
        let entry = Member::at("http://x");
        let joined = members_config_map("team-a", "demo", Some(&entry));
        assert_eq!(joined.metadata.name.as_deref(), Some(SHARED_NAME));
        assert_eq!(
            joined.data,
            Some(BTreeMap::from([("demo".to_string(), entry.to_value())]))
        );
        assert_eq!(members_config_map("team-a", "demo", None).data, None);
        assert_ne!(member_field_manager("a"), member_field_manager("b"));
    }

    #[test]
    fn the_shared_pod_passes_the_restricted_profile_and_never_selects_a_clusters_pods() {
        let Ok(shared) = shared_objects("team-a", &settings()) else {
            panic!("no shared objects");
        };
        let spec = shared.deployment.spec.clone();
        let selector = spec.selector.match_labels.clone().unwrap_or_default();
        let per_cluster = super::super::selector_labels("infinispan-resources-operator-shared");
        assert_ne!(selector, per_cluster);
        let pod = spec.template.spec.unwrap_or_default();
        assert_restricted(&pod);
        let mut no_image = settings();
        no_image.image = " ".into();
        assert!(matches!(
            shared_objects("team-a", &no_image),
            Err(BuildError::MissingImage)
        ));
    }
}
