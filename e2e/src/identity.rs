//! The resources operator's own Kubernetes identity in the end-to-end suites: the
//! ServiceAccount, Role and RoleBinding of [`common_crds::rbac`] for one cluster, a token from
//! the TokenRequest API and a kubeconfig holding it. An operator started with that kubeconfig
//! has exactly the permissions a real install gives it, on an API server that enforces RBAC
//! and `OwnerReferencesPermissionEnforcement`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::rbac::{self, OperatorScope};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::{TEST_FIELD_MANAGER, Testbed, eventually};

/// Lifetime asked of the token: longer than any test.
const TOKEN_SECONDS: i64 = 3600;

/// A ServiceAccount bound to the resources operator's Role, with a kubeconfig for it.
#[derive(Clone, Debug)]
pub struct OperatorIdentity {
    pub namespace: String,
    pub service_account: String,
    /// A kubeconfig for the testbed's API server with the account's token (mode 0600).
    pub kubeconfig: PathBuf,
}

impl OperatorIdentity {
    /// Applies the ServiceAccount, Role and RoleBinding of `scope` (as `admin`), requests a
    /// token for the account, writes a kubeconfig with it next to the operator logs, and waits
    /// until the API server's authorizer knows the binding.
    pub async fn create(
        admin: &Client,
        testbed: &Testbed,
        scope: OperatorScope<'_>,
    ) -> anyhow::Result<Self> {
        let namespace = scope.namespace;
        let account = rbac::service_account(scope);
        let name = account.name_any();
        apply(admin, namespace, &account).await?;
        apply(admin, namespace, &rbac::role(scope)).await?;
        apply(admin, namespace, &rbac::role_binding(scope, &name)).await?;
        Self::with_token(admin, testbed, namespace, name, scope.cluster).await
    }

    /// The identity of the shared resources operator of `namespace` serving `members`
    /// (`common_crds::shared`): its ServiceAccount, Role and RoleBinding, and each member's
    /// Role (its credentials Secret readable) bound to it, as the cluster operator makes them.
    pub async fn create_shared(
        admin: &Client,
        testbed: &Testbed,
        namespace: &str,
        members: &[OperatorScope<'_>],
    ) -> anyhow::Result<Self> {
        use common_crds::shared::SHARED_NAME;
        apply(admin, namespace, &rbac::shared_service_account(namespace)).await?;
        apply(admin, namespace, &rbac::shared_role(namespace)).await?;
        apply(admin, namespace, &rbac::shared_role_binding(namespace)).await?;
        for scope in members {
            apply(
                admin,
                namespace,
                &rbac::member_role(*scope, &[scope.credentials_secret]),
            )
            .await?;
            apply(
                admin,
                namespace,
                &rbac::member_role_binding(*scope, &[SHARED_NAME]),
            )
            .await?;
        }
        let last = members.last().map(|m| m.cluster).unwrap_or_default();
        Self::with_token(admin, testbed, namespace, SHARED_NAME.to_string(), last).await
    }

    /// A token and kubeconfig for the ServiceAccount `name`, once the authorizer lets it read
    /// the Lease of `cluster`.
    async fn with_token(
        admin: &Client,
        testbed: &Testbed,
        namespace: &str,
        name: String,
        cluster: &str,
    ) -> anyhow::Result<Self> {
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
            .create_token_request(&name, &PostParams::default(), &request)
            .await
            .with_context(|| format!("requesting a token for {namespace}/{name}"))?
            .status
            .and_then(|status| status.token)
            .filter(|token| !token.is_empty())
            .with_context(|| format!("the TokenRequest for {namespace}/{name} gave no token"))?;

        let dir = crate::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join(format!("{namespace}-{name}.kubeconfig"));
        write_kubeconfig(&testbed.kubeconfig, &kubeconfig, &name, namespace, &token)?;

        let identity = Self {
            namespace: namespace.to_string(),
            service_account: name,
            kubeconfig,
        };
        // The RBAC authorizer reads bindings from a cache: wait until it has this one.
        let lease = rbac::leader_lease_name(cluster);
        let (identity_ref, lease) = (&identity, lease.as_str());
        eventually(
            &format!("the binding of {} is in force", identity.user()),
            Duration::from_secs(10),
            || async move {
                identity_ref
                    .can(admin, "coordination.k8s.io", "leases", "get", Some(lease))
                    .await
                    .map(|allowed| allowed.then_some(()))
            },
        )
        .await?;
        Ok(identity)
    }

    /// The account's user name: `system:serviceaccount:<namespace>:<name>`.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }

    /// The groups the API server gives the account's tokens.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_string(),
        ]
    }

    /// A client authenticated as the account.
    pub async fn client(&self) -> anyhow::Result<Client> {
        crate::client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Whether the account may `verb` the `resource` (`plural` or `plural/subresource`) of
    /// `group` named `name` in its namespace, as a SubjectAccessReview by `admin` says.
    pub async fn can(
        &self,
        admin: &Client,
        group: &str,
        resource: &str,
        verb: &str,
        name: Option<&str>,
    ) -> anyhow::Result<bool> {
        self.can_in(admin, &self.namespace, group, resource, verb, name)
            .await
    }

    /// [`Self::can`] in `namespace`.
    pub async fn can_in(
        &self,
        admin: &Client,
        namespace: &str,
        group: &str,
        resource: &str,
        verb: &str,
        name: Option<&str>,
    ) -> anyhow::Result<bool> {
        let (resource, subresource) = match resource.split_once('/') {
            Some((resource, subresource)) => (resource, Some(subresource.to_string())),
            None => (resource, None),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(self.user()),
                groups: Some(self.groups()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_string()),
                    group: Some(group.to_string()),
                    resource: Some(resource.to_string()),
                    subresource,
                    verb: Some(verb.to_string()),
                    name: name.map(str::to_string),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(admin.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = answer
            .status
            .context("SubjectAccessReview without status")?;
        ensure!(
            status
                .evaluation_error
                .as_deref()
                .unwrap_or_default()
                .is_empty(),
            "SubjectAccessReview error: {:?}",
            status.evaluation_error
        );
        Ok(status.allowed)
    }
}

/// Server-side apply of one namespaced object as the test harness.
pub(crate) async fn apply<K>(admin: &Client, namespace: &str, object: &K) -> anyhow::Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let name = object.name_any();
    Api::<K>::namespaced(admin.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply(TEST_FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("applying {} {namespace}/{name}", K::kind(&())))?;
    Ok(())
}

/// Writes a kubeconfig for the admin kubeconfig's cluster (server and CA) with `token` as the
/// user, readable by the owner only.
pub(crate) fn write_kubeconfig(
    admin: &Path,
    path: &Path,
    user: &str,
    namespace: &str,
    token: &str,
) -> anyhow::Result<()> {
    let admin_config =
        Kubeconfig::read_from(admin).with_context(|| format!("reading {}", admin.display()))?;
    let context_name = admin_config
        .current_context
        .clone()
        .context("the admin kubeconfig has no current context")?;
    let cluster_name = admin_config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .context("the admin kubeconfig's current context names no cluster")?;
    let cluster = admin_config
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .context("the admin kubeconfig's cluster is missing")?;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{
            "name": user,
            "context": { "cluster": cluster_name, "user": user, "namespace": namespace },
        }],
        "current-context": user,
    });
    let yaml = serde_saphyr::to_string(&config)?;
    write_private(path, &yaml).with_context(|| format!("writing {}", path.display()))
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}
