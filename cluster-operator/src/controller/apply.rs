//! Server-side apply under the cluster operator's one field manager, and deletion of what the
//! CR no longer asks for (only objects the CR controls).

use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The API server refused an object (its own message, for the `Degraded` condition).
#[derive(Debug, thiserror::Error)]
#[error("the API server refused the {kind} {name}: {message}")]
pub struct Refused {
    pub kind: String,
    pub name: String,
    pub message: String,
}

/// Applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The object is invalid or its change forbidden (4xx but conflicts): the user must change
    /// the CR.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The API server failed or could not be reached: retried.
    #[error("applying the {kind} {name} failed: {source}")]
    Api {
        kind: String,
        name: String,
        source: kube::Error,
    },
}

/// Applies `object` (forcing ownership of its fields) and returns what the API server holds
/// after it.
pub async fn apply<K>(client: &kube::Client, object: &K) -> Result<K, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(|source| classify(K::kind(&()).into_owned(), name, source))
}

/// Applies `desired` when the CR asks for it, else deletes the left-over `name` the CR
/// controls (an optional object the CR no longer asks for).
pub async fn apply_or_remove<K>(
    client: &kube::Client,
    desired: Option<&K>,
    namespace: &str,
    name: &str,
    owner_uid: &str,
) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    match desired {
        Some(object) => apply(client, object).await.map(|_| ()),
        None => delete_owned::<K>(client, namespace, name, owner_uid)
            .await
            .map(|_| ()),
    }
}

/// Deletes the object `name` of kind `K` if it exists and the CR with `owner_uid` controls it;
/// returns whether a deletion was sent.
pub async fn delete_owned<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    owner_uid: &str,
) -> Result<bool, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = || K::kind(&()).into_owned();
    let Some(found) = api
        .get_opt(name)
        .await
        .map_err(|source| classify(kind(), name.to_string(), source))?
    else {
        return Ok(false);
    };
    let controlled = found
        .owner_references()
        .iter()
        .any(|owner| owner.controller == Some(true) && owner.uid == owner_uid);
    if !controlled || found.meta().deletion_timestamp.is_some() {
        return Ok(false);
    }
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(classify(kind(), name.to_string(), source)),
    }
}

fn classify(kind: String, name: String, source: kube::Error) -> ApplyError {
    match source {
        kube::Error::Api(status)
            if (400..500).contains(&status.code) && ![409, 429].contains(&status.code) =>
        {
            ApplyError::Refused(Refused {
                kind,
                name,
                message: status.message,
            })
        }
        source => ApplyError::Api { kind, name, source },
    }
}
