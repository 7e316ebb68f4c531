//! The copy Jobs of [`super::volume`] on the API server: created for a cluster, and read back
//! (the Job and its pod's termination message).

use common_crds::Infinispan;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use super::volume::{self, Copy, CopyJob, JobState};
use super::{Context, ReconcileError};
use crate::servers::ServerAccessError;

/// The state of the copy Job `name`, `None` when there is none.
pub(crate) async fn state(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<JobState>, ReconcileError> {
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), namespace);
    let Some(job) = jobs
        .get_opt(name)
        .await
        .map_err(ReconcileError::kube(format!(
            "reading the Job {namespace}/{name}"
        )))?
    else {
        return Ok(None);
    };
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await
        .map_err(ReconcileError::kube(format!(
            "listing the pods of the Job {namespace}/{name}"
        )))?;
    Ok(Some(volume::job_state(&job, &pods.items)))
}

/// Creates the copy Job `name` (owned by `owner`) talking to pod 0 of `cluster` with the
/// claim `claim` mounted; one already there (created before a crash) is kept. `Err` inside:
/// the cluster cannot be reached yet (its credentials, its certificate).
pub(crate) async fn create(
    ctx: &Context,
    cluster: &Infinispan,
    name: &str,
    owner: OwnerReference,
    claim: &str,
    copy: Copy,
) -> Result<Result<(), ServerAccessError>, ReconcileError> {
    let access = match ctx.servers.node_access(&ctx.client, cluster).await {
        Ok(access) => access,
        Err(error) => return Ok(Err(error)),
    };
    let (cluster_name, namespace) = crate::servers::name_and_namespace(cluster).map_err(|_| {
        ReconcileError::MissingMetadata {
            kind: "Infinispan",
            field: "name",
        }
    })?;
    let ca_pem = access
        .ca_pem
        .as_deref()
        .map(String::from_utf8_lossy)
        .map(|pem| pem.into_owned());
    let job = CopyJob {
        name: name.to_string(),
        namespace,
        owner,
        cluster: cluster_name,
        image: &ctx.archive_image,
        image_pull_secrets: &ctx.image_pull_secrets,
        claim,
        url: &access.endpoint.url,
        tls_server_name: access.endpoint.tls_server_name.as_deref(),
        credentials_secret: access.credentials_secret.as_deref(),
        ca_pem: ca_pem.as_deref(),
        client_certificate_secret: access
            .client_certificate
            .as_ref()
            .map(|(secret, _)| secret.as_str()),
        copy,
    }
    .build();
    match Api::<Job>::namespaced(ctx.client.clone(), namespace)
        .create(&PostParams::default(), &job)
        .await
    {
        Ok(_) => {
            tracing::info!(%namespace, job = %name, %claim, "copy Job created");
            Ok(Ok(()))
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Ok(())),
        Err(error) => Err(ReconcileError::Kube {
            what: format!("creating the Job {namespace}/{name}"),
            source: error,
        }),
    }
}

/// Deletes the copy Job `name` and its pod, if there is one (best effort: a Job left goes by
/// its TTL). Done once the Backup or Restore recorded its outcome: the finished pod would
/// otherwise keep the claim in use (its deletion waits for that).
pub(crate) async fn delete(ctx: &Context, namespace: &str, name: &str) {
    match Api::<Job>::namespaced(ctx.client.clone(), namespace)
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) => tracing::info!(%namespace, job = %name, "finished copy Job deleted"),
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => {
            tracing::warn!(%namespace, job = %name, %error, "cannot delete a finished copy Job (it goes by its TTL)")
        }
    }
}
