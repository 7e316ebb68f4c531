//! Which namespaces the cluster operator watches (pure).
//!
//! - `--watch-namespaces a,b` (env `CLUSTER_OPERATOR_WATCH_NAMESPACES`, or `WATCH_NAMESPACE`,
//!   the variable OLM sets from the OperatorGroup's target namespaces and the Helm chart sets
//!   from its `watchNamespaces` value): those namespaces; one watch per namespace, so a Role per
//!   namespace is enough.
//! - the value `*`, or an empty value: all namespaces (needs a ClusterRole).
//! - nothing set: the operator's own namespace when it runs in a pod (`POD_NAMESPACE`, else the
//!   service account's namespace file), all namespaces when it runs outside a cluster.

use std::collections::BTreeSet;

use common_crds::naming::is_dns1123_label;

/// The namespaces watched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    All,
    Namespaces(BTreeSet<String>),
}

/// A watch scope that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScopeError {
    #[error("{0:?} in the watched namespaces is not a namespace name (a DNS-1123 label)")]
    InvalidNamespace(String),
    #[error(
        "no namespace to watch: running in a pod but neither --watch-namespaces, WATCH_NAMESPACE, POD_NAMESPACE nor the service account's namespace file gives one"
    )]
    NoOwnNamespace,
}

/// The scope from the flag (or its environment variables) and, when none is given, where the
/// operator runs: `own_namespace` is `Some` in a pod.
pub fn resolve(
    requested: Option<&str>,
    in_cluster: bool,
    own_namespace: Option<&str>,
) -> Result<WatchScope, ScopeError> {
    match requested.map(str::trim) {
        Some("" | "*") => Ok(WatchScope::All),
        Some(list) => {
            let mut namespaces = BTreeSet::new();
            for namespace in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if !is_dns1123_label(namespace) {
                    return Err(ScopeError::InvalidNamespace(namespace.to_string()));
                }
                namespaces.insert(namespace.to_string());
            }
            if namespaces.is_empty() {
                Ok(WatchScope::All)
            } else {
                Ok(WatchScope::Namespaces(namespaces))
            }
        }
        None if !in_cluster => Ok(WatchScope::All),
        None => match own_namespace.map(str::trim).filter(|n| !n.is_empty()) {
            Some(namespace) => Ok(WatchScope::Namespaces(BTreeSet::from([
                namespace.to_string()
            ]))),
            None => Err(ScopeError::NoOwnNamespace),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> WatchScope {
        WatchScope::Namespaces(list.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn explicit_lists_win() {
        assert_eq!(
            resolve(Some("a, b,a"), true, Some("own")),
            Ok(names(&["a", "b"]))
        );
        assert_eq!(resolve(Some("*"), true, Some("own")), Ok(WatchScope::All));
        assert_eq!(resolve(Some(""), false, None), Ok(WatchScope::All));
        assert_eq!(resolve(Some(" , "), false, None), Ok(WatchScope::All));
        assert_eq!(
            resolve(Some("ok,Not_OK"), false, None),
            Err(ScopeError::InvalidNamespace("Not_OK".into()))
        );
    }

    #[test]
    fn defaults_depend_on_where_it_runs() {
        assert_eq!(resolve(None, false, None), Ok(WatchScope::All));
        assert_eq!(
            resolve(None, true, Some("operators")),
            Ok(names(&["operators"]))
        );
        assert_eq!(resolve(None, true, None), Err(ScopeError::NoOwnNamespace));
    }
}
