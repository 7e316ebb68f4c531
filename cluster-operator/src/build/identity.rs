//! What every object of a cluster carries, for the server's and the resources operator's
//! builders alike: the `Infinispan` CR's checked name and namespace, the controller owner
//! reference to it, the recommended labels, and the in-cluster DNS name of its Services.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::labels::{CLUSTER_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER};
use common_crds::naming::{is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

const NAME_LABEL: &str = "app.kubernetes.io/name";
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// `app.kubernetes.io/part-of` of every object.
pub const PART_OF: &str = "infinispan";

/// The labels of the objects of one component (`app`, `component`) of `cluster`: the
/// recommended `app.kubernetes.io/*` labels and `infinispan.org/cluster`.
pub(super) fn labels(app: &str, component: &str, cluster: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(app, cluster);
    labels.extend(
        [
            (COMPONENT_LABEL, component),
            (PART_OF_LABEL, PART_OF),
            (MANAGED_BY_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER),
            (CLUSTER_LABEL, cluster),
        ]
        .map(|(key, value)| (key.to_string(), value.to_string())),
    );
    labels
}

/// A selector that never changes: the name (`app`) and the instance (the cluster).
pub(super) fn selector_labels(app: &str, cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), app.to_string()),
        (INSTANCE_LABEL.to_string(), cluster.to_string()),
    ])
}

/// The controller owner reference to the `Infinispan` CR `name` with `uid`, with
/// `blockOwnerDeletion` (setting it needs `update` on `infinispans/finalizers` under the
/// OwnerReferencesPermissionEnforcement admission plugin).
pub(super) fn controller_reference(name: &str, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: Infinispan::api_version(&()).into_owned(),
        kind: Infinispan::kind(&()).into_owned(),
        name: name.to_string(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The CR lacks metadata its objects need: the builders work on the object as read from the
/// API server.
#[derive(Debug, thiserror::Error)]
pub enum MissingMetadata {
    #[error("the Infinispan CR has no metadata.name")]
    Name,
    #[error("the Infinispan CR {name} has no metadata.namespace")]
    Namespace { name: String },
    #[error(
        "the Infinispan CR {namespace}/{name} has no metadata.uid (build from the object read from the API server)"
    )]
    Uid { namespace: String, name: String },
}

/// The CR's name and namespace, both non-empty; the name a DNS-1123 label of at most
/// `max_name_len` characters (a label has at most 63 anyway), else `invalid_name` of it (each
/// builder says why the name must be so).
pub(super) fn name_and_namespace<E: From<MissingMetadata>>(
    cluster: &Infinispan,
    max_name_len: usize,
    invalid_name: impl FnOnce(String) -> E,
) -> Result<(&str, &str), E> {
    let name = cluster
        .metadata
        .name
        .as_deref()
        .filter(|name| !name.is_empty())
        .ok_or(MissingMetadata::Name)?;
    if !is_dns1123_label(name) || name.len() > max_name_len {
        return Err(invalid_name(name.to_string()));
    }
    let namespace = cluster
        .metadata
        .namespace
        .as_deref()
        .filter(|namespace| !namespace.is_empty())
        .ok_or_else(|| MissingMetadata::Namespace {
            name: name.to_string(),
        })?;
    Ok((name, namespace))
}

/// The controller owner reference to the CR `name` in `namespace` (as checked by
/// [`name_and_namespace`]), which must have a (non-empty) uid.
pub(super) fn owner_reference(
    cluster: &Infinispan,
    name: &str,
    namespace: &str,
) -> Result<OwnerReference, MissingMetadata> {
    let uid = cluster
        .metadata
        .uid
        .clone()
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| MissingMetadata::Uid {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })?;
    Ok(controller_reference(name, uid))
}

/// Metadata of an object of the cluster: name, namespace, labels and the owner reference.
pub(super) fn object_meta(
    name: String,
    namespace: &str,
    labels: BTreeMap<String, String>,
    owner: &OwnerReference,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: Some(labels),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// `<service>.<namespace>.svc.<cluster_domain>`, the domain without a trailing dot; `None` when
/// the domain is not a DNS name.
pub(super) fn service_host(service: &str, namespace: &str, cluster_domain: &str) -> Option<String> {
    let domain = cluster_domain.strip_suffix('.').unwrap_or(cluster_domain);
    is_dns1123_subdomain(domain).then(|| format!("{service}.{namespace}.svc.{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::test_support::cluster;

    /// What the builders' errors become; `InvalidName` stands for each builder's own.
    #[derive(Debug)]
    enum Error {
        Missing(MissingMetadata),
        InvalidName,
    }

    impl From<MissingMetadata> for Error {
        fn from(missing: MissingMetadata) -> Self {
            Self::Missing(missing)
        }
    }

    fn checked(cr: &Infinispan, max_name_len: usize) -> Result<(&str, &str), Error> {
        name_and_namespace(cr, max_name_len, |_| Error::InvalidName)
    }

    #[test]
    fn names_are_checked_in_order_and_the_owner_needs_a_uid() {
        let cr = cluster("demo", "team-a", "uid-1");
        assert_eq!(checked(&cr, 63).ok(), Some(("demo", "team-a")));
        assert!(matches!(checked(&cr, 3), Err(Error::InvalidName)));
        let mut bad = cluster("Demo", "", "uid-1");
        assert!(matches!(checked(&bad, 63), Err(Error::InvalidName)));
        bad.metadata.name = Some("demo".to_string());
        assert!(matches!(
            checked(&bad, 63),
            Err(Error::Missing(MissingMetadata::Namespace { .. }))
        ));
        bad.metadata.name = Some(String::new());
        assert!(matches!(
            checked(&bad, 63),
            Err(Error::Missing(MissingMetadata::Name))
        ));
        let mut no_uid = cr.clone();
        no_uid.metadata.uid = Some(String::new());
        assert!(matches!(
            owner_reference(&no_uid, "demo", "team-a"),
            Err(MissingMetadata::Uid { .. })
        ));
        let owner = owner_reference(&cr, "demo", "team-a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(owner, controller_reference("demo", "uid-1".to_string()));
    }

    #[test]
    fn service_hosts_drop_the_domains_trailing_dot_and_refuse_a_bad_domain() {
        assert_eq!(
            service_host("demo-ping", "ns", "cluster.local.").as_deref(),
            Some("demo-ping.ns.svc.cluster.local")
        );
        for bad in ["", ".", "Cluster.Local", "a..b", "-x"] {
            assert_eq!(service_host("demo", "ns", bad), None, "{bad:?}");
        }
    }
}
