//! Where the shared label policy applies: its binding's `matchResources.namespaceSelector` lists
//! the namespaces that have a shared resources operator, and no other.
//!
//! The policy's parameter is the members ConfigMap of the request's namespace. Where the
//! binding matches a namespace without that ConfigMap, Kubernetes 1.37's API server, not finding
//! the parameter in its informer, asks itself for it with a direct GET (1 s timeout) on every
//! write of the five kinds, before the policy's match condition is evaluated
//! (docs/security.md). Matching only the namespaces with a shared operator spares every other
//! namespace that read.
//!
//! The invariant: the binding matches every namespace in which the shared identity may write.
//! A namespace is added before its members ConfigMap and shared objects are made
//! ([`PolicyScope::include`], which a join waits for) and taken out only once it has no members
//! ConfigMap: after the last member left and the ConfigMap was deleted, or when a cluster's
//! reconcile finds none (its namespace being deleted, say), where the policy, without its
//! parameter, allows everything anyway ([`PolicyScope::exclude`]); never while a join in that
//! namespace is under way. Whatever fails, the binding is left matching more, never
//! less: a selector that could not be narrowed only costs the read above. At startup the set is
//! the namespaces that have a members ConfigMap ([`PolicyScope::seed`]).
//!
//! The selector is written by a merge patch with a field manager of its own
//! ([`SCOPE_FIELD_MANAGER`]): the operator's startup apply of the policy (OLM) leaves it alone
//! (it does not set the field), and the chart's other fields stay the chart's. A
//! `helm upgrade` that sets the chart's selector again widens the binding until the operator
//! next writes it (at its start, or when a namespace gains or loses its shared operator).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use common_crds::shared::SHARED_NAME;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::scope::WatchScope;

/// The field manager of the binding's namespace selector.
pub const SCOPE_FIELD_MANAGER: &str = "infinispan-cluster-operator-policy-scope";

/// The label every namespace has, its name (set by the API server).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The selector of exactly `namespaces`; with none, a selector no namespace matches (pure).
pub fn namespace_selector(namespaces: &BTreeSet<String>) -> LabelSelector {
    let requirement = if namespaces.is_empty() {
        LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_string(),
            operator: "DoesNotExist".to_string(),
            values: None,
        }
    } else {
        LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_string(),
            operator: "In".to_string(),
            values: Some(namespaces.iter().cloned().collect()),
        }
    };
    LabelSelector {
        match_expressions: Some(vec![requirement]),
        match_labels: None,
    }
}

/// Finding or writing the binding's namespaces failed.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    #[error("listing the shared resources operators' ConfigMaps failed: {0}")]
    List(#[source] kube::Error),
    #[error(
        "narrowing the shared label policy's binding {binding} to the namespaces {namespaces:?} failed: {source}"
    )]
    Write {
        binding: String,
        namespaces: Vec<String>,
        #[source]
        source: kube::Error,
    },
}

/// A join waits for the scope and is retried like any failed apply.
impl From<ScopeError> for crate::controller::apply::ApplyError {
    fn from(error: ScopeError) -> Self {
        match error {
            ScopeError::List(source) => Self::Api {
                kind: "ConfigMap".into(),
                name: SHARED_NAME.into(),
                source,
            },
            ScopeError::Write {
                binding,
                namespaces,
                source,
            } => Self::Api {
                kind: "ValidatingAdmissionPolicyBinding".into(),
                name: format!("{binding} (its namespaces {namespaces:?})"),
                source,
            },
        }
    }
}

/// What the scope knows, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// The namespaces the binding must match.
    wanted: BTreeSet<String>,
    /// What the binding was last written with; `None` before the first write.
    written: Option<BTreeSet<String>>,
    /// Joins under way, by namespace: a namespace with one is never taken out.
    joining: BTreeMap<String, usize>,
}

/// The shared label policy's binding scope, kept by the cluster operator (one per process;
/// clones share it).
#[derive(Clone, Debug)]
pub struct PolicyScope {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    /// The binding's name; `None`: the operator does not scope it.
    binding: Option<String>,
    state: Mutex<State>,
    /// One write of the binding at a time, each with the latest wanted set.
    writing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyScope")
            .field("binding", &self.binding)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A join under way in a namespace: while it lives the namespace is not taken out of the scope.
#[derive(Debug)]
pub struct Joining {
    scope: PolicyScope,
    namespace: String,
}

impl Drop for Joining {
    fn drop(&mut self) {
        self.scope.with_state(|state| {
            if let Some(count) = state.joining.get_mut(&self.namespace) {
                *count -= 1;
                if *count == 0 {
                    state.joining.remove(&self.namespace);
                }
            }
        });
    }
}

impl PolicyScope {
    /// The scope of the binding named `binding`; `None` leaves the binding as it is.
    pub fn new(client: kube::Client, binding: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                binding,
                state: Mutex::default(),
                writing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
    }

    /// At startup: the scope is the namespaces of `scope` that have a members ConfigMap. On an
    /// error the binding keeps what it matches (more than needed at worst).
    pub async fn seed(&self, scope: &WatchScope) -> Result<(), ScopeError> {
        if self.inner.binding.is_none() {
            return Ok(());
        }
        let found = self
            .namespaces_with_members(scope)
            .await
            .map_err(ScopeError::List)?;
        self.with_state(|state| state.wanted.extend(found));
        self.write().await
    }

    /// The namespaces of `scope` with a members ConfigMap.
    async fn namespaces_with_members(
        &self,
        scope: &WatchScope,
    ) -> Result<BTreeSet<String>, kube::Error> {
        let by_name = ListParams::default().fields(&format!("metadata.name={SHARED_NAME}"));
        let client = &self.inner.client;
        let lists = match scope {
            WatchScope::All => vec![Api::<ConfigMap>::all(client.clone())],
            WatchScope::Namespaces(namespaces) => namespaces
                .iter()
                .map(|namespace| Api::<ConfigMap>::namespaced(client.clone(), namespace))
                .collect(),
        };
        let mut found = BTreeSet::new();
        for api in lists {
            found.extend(
                api.list_metadata(&by_name)
                    .await?
                    .items
                    .into_iter()
                    .filter_map(|map| map.metadata.namespace),
            );
        }
        Ok(found)
    }

    /// A join in `namespace` starts: the binding matches it once this returns. The namespace
    /// stays in the scope at least as long as the returned [`Joining`] lives.
    pub async fn include(&self, namespace: &str) -> Result<Joining, ScopeError> {
        self.with_state(|state| {
            state.wanted.insert(namespace.to_string());
            *state.joining.entry(namespace.to_string()).or_default() += 1;
        });
        let joining = Joining {
            scope: self.clone(),
            namespace: namespace.to_string(),
        };
        // Always through `write`, which compares under the write lock: an exclusion of this
        // namespace whose patch is in flight has not reached `written` yet, and must not be
        // taken for the binding's state.
        self.write().await?;
        Ok(joining)
    }

    /// The last member of `namespace` left and its members ConfigMap is gone: the binding no
    /// longer needs to match it, unless a join there is under way. A failure is logged (the
    /// binding matches more than needed until the next write).
    pub async fn exclude(&self, namespace: &str) {
        let removed = self.with_state(|state| {
            !state.joining.contains_key(namespace) && state.wanted.remove(namespace)
        });
        if removed && let Err(error) = self.write().await {
            tracing::warn!(%error, "the shared label policy's binding still matches {namespace}");
        }
    }

    /// Writes the wanted set to the binding when it differs from what was written last.
    async fn write(&self) -> Result<(), ScopeError> {
        let Some(binding) = &self.inner.binding else {
            return Ok(());
        };
        let _one_at_a_time = self.inner.writing.lock().await;
        let wanted = self.with_state(|state| {
            (state.written.as_ref() != Some(&state.wanted)).then(|| state.wanted.clone())
        });
        let Some(wanted) = wanted else {
            return Ok(());
        };
        // A merge patch, not an apply: it never creates the binding (an apply of this one field
        // would try, and fail on the fields it lacks), and a binding that is not there says 404.
        let patch = json!({
            "spec": { "matchResources": { "namespaceSelector": namespace_selector(&wanted) } },
        });
        let params = PatchParams {
            field_manager: Some(SCOPE_FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.inner.client.clone());
        let result = bindings
            .patch(binding, &params, &Patch::Merge(&patch))
            .await;
        match result {
            Ok(_) => {
                tracing::info!(%binding, namespaces = ?wanted, "the shared label policy's binding matches the namespaces with a shared resources operator");
            }
            // No binding (the label policy is not installed) or no right to change it: it
            // stays as it is, which the operator never narrowed.
            Err(kube::Error::Api(status)) if status.code == 404 => {
                tracing::info!(%binding, "no such binding (the shared label policy is not installed): nothing to scope");
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(%binding, reason = %status.message, "the shared label policy's binding is not scoped to the namespaces with a shared resources operator: writes of the five kinds elsewhere cost the API server a lookup each (docs/security.md)");
            }
            Err(source) => {
                return Err(ScopeError::Write {
                    binding: binding.clone(),
                    namespaces: wanted.into_iter().collect(),
                    source,
                });
            }
        }
        self.with_state(|state| state.written = Some(wanted));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_lists_the_namespaces_and_matches_none_without_any() {
        let some: BTreeSet<String> = ["b", "a"].map(String::from).into();
        let selector = serde_json::to_value(namespace_selector(&some)).expect("json");
        assert_eq!(
            selector,
            json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}
            ]})
        );
        let none = serde_json::to_value(namespace_selector(&BTreeSet::new())).expect("json");
        assert_eq!(
            none,
            json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}
            ]})
        );
    }
}
