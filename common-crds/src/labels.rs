//! Names the operators share with the API server and with each other: the API group, labels,
//! annotations, finalizers and field managers. Every such string lives here, once.

/// The API group of every kind of the project.
pub const API_GROUP: &str = "infinispan.org";

/// Label naming the `Infinispan` cluster (same namespace) a resource belongs to. The resources
/// operator of a cluster selects its CRs by this label. Required on Cache, Template, Counter,
/// Schema and Task; it can neither be changed nor removed once set (design N3, enforced by the
/// admission policy of `generate::label_policy`).
pub const CLUSTER_LABEL: &str = "infinispan.org/cluster";

/// Label saying who created a resource CR: a user ([`ORIGIN_KUBERNETES`]) or the resources
/// operator mirroring an object created on the server ([`ORIGIN_SERVER`]).
pub const ORIGIN_LABEL: &str = "infinispan.org/origin";
/// [`ORIGIN_LABEL`] value of a CR written by a user (or any client other than the operator).
pub const ORIGIN_KUBERNETES: &str = "kubernetes";
/// [`ORIGIN_LABEL`] value of a mirror CR the resources operator created for a server object.
pub const ORIGIN_SERVER: &str = "server";

/// Who created the CR with these labels: [`ORIGIN_SERVER`] for a mirror CR, else
/// [`ORIGIN_KUBERNETES`].
pub fn origin(labels: &std::collections::BTreeMap<String, String>) -> &'static str {
    match labels.get(ORIGIN_LABEL).map(String::as_str) {
        Some(ORIGIN_SERVER) => ORIGIN_SERVER,
        _ => ORIGIN_KUBERNETES,
    }
}

/// Annotation; `"false"` makes a CR unmanaged: never synced, it still claims its server name and
/// deleting it leaves the server object alone (design E1, unmanaged CRs).
pub const MANAGED_ANNOTATION: &str = "infinispan.org/managed";
/// [`MANAGED_ANNOTATION`] value that turns management off.
pub const MANAGED_FALSE: &str = "false";

/// Annotation; `"true"` pauses reconciliation of that one object: nothing is written to either
/// side and the CR reports `ReconciliationPaused=True` (design E2).
pub const PAUSE_RECONCILIATION_ANNOTATION: &str = "infinispan.org/pause-reconciliation";
/// [`PAUSE_RECONCILIATION_ANNOTATION`] value that pauses.
pub const PAUSE_RECONCILIATION_TRUE: &str = "true";

/// Annotation on a Secret or ConfigMap that an `Infinispan` CR names (`endpointSecretName`,
/// `endpointEncryption.certSecretName`, `configMapName`): the clusters allowed to use it, a
/// comma-separated list of `Infinispan` names of its namespace, or `*` for all of them. Naming
/// an object in a CR is not enough: whoever may write the object says which clusters may read
/// it (issue 23, no privilege widening through a CR).
pub const ALLOW_CLUSTERS_ANNOTATION: &str = "infinispan.org/allow-clusters";
/// [`ALLOW_CLUSTERS_ANNOTATION`] value that allows every cluster of the namespace.
pub const ALLOW_CLUSTERS_ALL: &str = "*";

/// Finalizer the resources operator puts on Cache, Template, Counter, Schema and Task CRs, so
/// that deleting a CR deletes the server object first (design K3).
pub const RESOURCES_FINALIZER: &str = "resources.infinispan.org/finalizer";
/// Finalizer the cluster operator puts on `Infinispan` CRs, so that the resources operator is
/// drained before the cluster goes (design E5).
pub const CLUSTER_FINALIZER: &str = "cluster.infinispan.org/finalizer";

/// Finalizer the cluster operator puts on `Backup` CRs, so that deleting a Backup deletes its
/// archive on the server first.
pub const BACKUP_FINALIZER: &str = "backups.infinispan.org/archive";

/// Server-side apply field manager of the cluster operator.
pub const CLUSTER_OPERATOR_FIELD_MANAGER: &str = "infinispan-cluster-operator";
/// Server-side apply field manager of the resources operator.
pub const RESOURCES_OPERATOR_FIELD_MANAGER: &str = "infinispan-resources-operator";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cr_without_the_origin_label_was_made_in_kubernetes() {
        let mut labels = std::collections::BTreeMap::new();
        assert_eq!(origin(&labels), ORIGIN_KUBERNETES);
        labels.insert(ORIGIN_LABEL.to_string(), ORIGIN_SERVER.to_string());
        assert_eq!(origin(&labels), ORIGIN_SERVER);
        labels.insert(ORIGIN_LABEL.to_string(), "anything else".to_string());
        assert_eq!(origin(&labels), ORIGIN_KUBERNETES);
    }
}
