//! The Backup controller's reconcile: start the server's backup job, follow it, delete its
//! archive when the CR goes (see [`super`] for the decisions).
//!
//! Steps of one reconcile (after the finalizer is in place):
//! 1. final phase: nothing (no request anywhere);
//! 2. not started: the cluster -> a client for its pod 0 -> the cluster's job slot -> the
//!    cache list when all caches are wanted -> `POST` the job (`409`: it is ours, adopted);
//! 3. started: `HEAD` the job -> running / done / failed (its `GET` text) / unknown;
//! 4. [`phase::decide`] -> status (written only on change), Event, requeue.
//!
//! Cleanup (the CR deleted): `DELETE` the job, which deletes the archive; released without it
//! when the cluster is gone, when the server says it has no such job, or when the job never
//! started and the server cannot be asked. A job that started on a cluster that exists but
//! cannot be reached keeps the finalizer, retried with backoff (escape: delete the cluster, or
//! remove the finalizer by hand).

use std::sync::Arc;

use common_crds::Backup;
use common_crds::backup::{ArchiveVolume, BackupStorage};
use infinispan_rest::{Error as RestError, JobStatus};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Api, Resource};

use super::phase::{self, Failure, JobKind, Location, Observation, Progress, Waiting};
use super::selection::{self, SelectionError};
use super::slots::Holder;
use super::volume::{self, Copy, JobState, Report};
use super::{
    BACKUP_FINALIZER, CleanupError, Context, ReconcileError, access_waiting, cluster, conclude,
    copy_job, identity, job_server, names, rest_waiting,
};

const KIND: &str = "Backup";

/// Reconciles one Backup.
pub(crate) async fn reconcile(
    backup: Arc<Backup>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    ctx.stats
        .backup_reconciles
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (namespace, _, _) = identity(&*backup, KIND)?;
    let api = Api::<Backup>::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, BACKUP_FINALIZER, backup, |event| async {
        match event {
            Finalizer::Apply(backup) => apply(&api, &backup, &ctx).await,
            Finalizer::Cleanup(backup) => cleanup(&backup, &ctx).await,
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

async fn apply(
    api: &Api<Backup>,
    backup: &Backup,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let (namespace, name, uid) = identity(backup, KIND)?;
    let current = Progress::from(backup.status.clone().unwrap_or_default());
    if current.is_final() {
        ctx.forget(&uid);
        if backup.spec.storage() == BackupStorage::Volume {
            copy_job::delete(ctx, &namespace, &volume::job_name(&name, &uid, "archive")).await;
        }
        return Ok(Action::await_change());
    }
    let job = names::backup_job(&namespace, &name, &uid);
    let observation = if current.job_started() {
        poll(backup, &job, ctx).await?
    } else {
        start(backup, &job, ctx).await?
    };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let decision = phase::decide(
        JobKind::Backup,
        &current,
        backup.metadata.generation,
        observation,
        &now,
        ctx.attempt(&uid),
    );
    conclude(ctx, api, backup, &current, decision, |p| {
        serde_json::to_value(common_crds::BackupStatus::from(p)).unwrap_or_default()
    })
    .await
}

/// Starts the server job, or says why it cannot start yet.
async fn start(backup: &Backup, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(backup, KIND)?;
    let cluster_name = &backup.spec.cluster;
    let Some(cluster) = cluster(ctx, &namespace, cluster_name).await? else {
        return Ok(Observation::Waiting {
            why: Waiting::ClusterNotFound,
            message: format!(
                "there is no Infinispan cluster {cluster_name} in namespace {namespace}"
            ),
        });
    };
    let server = match ctx.servers.node_client_for(&ctx.client, &cluster).await {
        Ok(server) => server,
        Err(error) => return Ok(access_waiting("", &error)),
    };
    // The claim first (`storage: Volume`): one of that name that is someone else's fails the
    // Backup before anything runs on the server.
    if let Some(refused) = ensure_claim(backup, ctx).await? {
        return Ok(refused);
    }
    let holder = Holder {
        kind: JobKind::Backup,
        name,
        uid: uid.clone(),
    };
    if let Some(busy) = ctx.take_slot(&namespace, cluster_name, holder) {
        return Ok(busy);
    }
    let observation = start_job(backup, job, &server).await;
    if !matches!(observation, Observation::Started { .. }) {
        ctx.slots.release(&uid);
    } else {
        ctx.stats
            .jobs_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(observation)
}

async fn start_job(backup: &Backup, job: &str, server: &infinispan_rest::Client) -> Observation {
    let selected = backup.spec.resources.as_ref();
    let server_caches = if selection::needs_cache_list(selected) {
        match server.list_caches().await {
            Ok(caches) => caches,
            Err(error) => return rest_waiting("", &error),
        }
    } else {
        Vec::new()
    };
    let (resources, left_out) = match selection::backup_resources(selected, &server_caches) {
        Ok(selection) => selection,
        Err(error @ (SelectionError::NothingSelected | SelectionError::NotInArchive { .. })) => {
            return Observation::Failed {
                why: Failure::InvalidSelection,
                message: error.to_string(),
            };
        }
    };
    let note = Some(if left_out.is_empty() {
        format!("backup job {job}")
    } else {
        format!(
            "backup job {job}; left out (Infinispan cannot back up a cache whose name holds '/'): {}",
            left_out.join(", ")
        )
    });
    match server.start_backup(job, None, Some(&resources)).await {
        Ok(()) | Err(RestError::AlreadyExists { .. }) => Observation::Started {
            archive: None,
            note,
        },
        Err(error @ RestError::Rejected { .. }) => Observation::Failed {
            why: Failure::ServerRejected,
            message: error.to_string(),
        },
        Err(error) => rest_waiting("", &error),
    }
}

/// `storage: Volume`: the Backup's claim, created unless it is there; `Some`: a claim of that
/// name that is not the Backup's (final: the spec cannot change).
async fn ensure_claim(
    backup: &Backup,
    ctx: &Context,
) -> Result<Option<Observation>, ReconcileError> {
    if backup.spec.storage() != BackupStorage::Volume {
        return Ok(None);
    }
    let (namespace, name, _) = identity(backup, KIND)?;
    let claims = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &namespace);
    let what = || format!("the PersistentVolumeClaim {namespace}/{name} of the Backup");
    match claims
        .get_opt(&name)
        .await
        .map_err(ReconcileError::kube(what()))?
    {
        Some(claim) if volume::claim_is_backups(&claim, &name) => Ok(None),
        Some(_) => Ok(Some(Observation::Failed {
            why: Failure::VolumeConflict,
            message: format!(
                "a PersistentVolumeClaim {name} exists that this Backup did not create (the archive of a Backup named {name} is kept on a claim of that name): delete or rename one of them, e.g. restore an old archive from it with a Restore's spec.source"
            ),
        })),
        None => {
            let Some(owner) = backup.controller_owner_ref(&()) else {
                return Err(ReconcileError::MissingMetadata {
                    kind: KIND,
                    field: "uid",
                });
            };
            claims
                .create(&PostParams::default(), &volume::claim(backup, &owner))
                .await
                .map_err(ReconcileError::kube(format!("creating {}", what())))?;
            Ok(None)
        }
    }
}

/// Looks at the server job, and at the Job copying its archive to the claim (`storage:
/// Volume`). The copy Job is looked at first: once it saved the archive, the server's copy is
/// deleted, and the Backup succeeds from the Job's report alone.
async fn poll(backup: &Backup, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(backup, KIND)?;
    let cluster_name = &backup.spec.cluster;
    let to_volume = backup.spec.storage() == BackupStorage::Volume;
    let copy_name = volume::job_name(&name, &uid, "archive");
    let path = volume::archive_path(&name);
    if to_volume && let Some(state) = copy_job::state(ctx, &namespace, &copy_name).await? {
        return Ok(match state {
            JobState::Running => copying(&copy_name, &name, &path),
            JobState::Finished(Report::Saved { bytes, sha256 }) => {
                delete_server_copy(backup, job, ctx).await;
                Observation::Succeeded {
                    archive: Some(Location {
                        label: volume::archive_label(&name, &path),
                        volume: Some(ArchiveVolume {
                            claim_name: name.clone(),
                            path,
                            bytes: i64::try_from(bytes).ok(),
                            sha256: Some(sha256),
                        }),
                    }),
                }
            }
            JobState::Finished(Report::Failed { reason, message }) => Observation::Failed {
                why: Failure::from_reason(&reason),
                message: format!(
                    "the Job {copy_name} copying the archive to the PersistentVolumeClaim {name}: {message}"
                ),
            },
            JobState::Finished(Report::Started { note }) => Observation::Failed {
                why: Failure::CopyFailed,
                message: format!("the Job {copy_name} restored instead of saving: {note}"),
            },
        });
    }
    let holder = Holder {
        kind: JobKind::Backup,
        name: name.clone(),
        uid: uid.clone(),
    };
    let server = match job_server(ctx, &namespace, cluster_name, job, holder).await? {
        Ok(server) => server,
        Err(observation) => return Ok(observation),
    };
    Ok(match server.backup_status(job).await {
        Ok(JobStatus::Running) => Observation::Running,
        Ok(JobStatus::Done) if to_volume => {
            let Some(cluster) = cluster(ctx, &namespace, cluster_name).await? else {
                return Ok(Observation::Failed {
                    why: Failure::JobLost,
                    message: format!(
                        "the Infinispan cluster {cluster_name} was deleted before its archive was saved"
                    ),
                });
            };
            let copy = Copy::Save {
                job: job.to_string(),
                path: path.clone(),
            };
            let Some(owner) = backup.controller_owner_ref(&()) else {
                return Err(ReconcileError::MissingMetadata {
                    kind: KIND,
                    field: "uid",
                });
            };
            match copy_job::create(ctx, &cluster, &copy_name, owner, &name, copy).await? {
                Ok(()) => copying(&copy_name, &name, &path),
                Err(error) => Observation::Unreachable {
                    message: error.to_string(),
                },
            }
        }
        Ok(JobStatus::Done) => Observation::Succeeded {
            archive: Some(format!("{cluster_name}:{job}").into()),
        },
        Ok(JobStatus::Failed) => {
            let text = match server.backup_failure(job).await {
                Ok(Some(text)) if !text.is_empty() => text,
                _ => "the server reports the backup failed (HTTP 500)".to_string(),
            };
            Observation::Failed {
                why: Failure::ServerFailed,
                message: format!(
                    "{text} (backup job {job}; the server's log has the cause, e.g. ISPN005041 another backup ran, ISPN005048 a resource does not exist)"
                ),
            }
        }
        Err(RestError::NotFound { .. }) => Observation::Failed {
            why: Failure::JobLost,
            message: format!(
                "the server no longer knows backup job {job}: its node restarted while the backup ran (Infinispan forgets its backup jobs on restart)"
            ),
        },
        Err(error) => Observation::Unreachable {
            message: error.to_string(),
        },
    })
}

fn copying(copy_job: &str, claim: &str, path: &str) -> Observation {
    Observation::Copying {
        message: format!(
            "the server wrote the archive; the Job {copy_job} copies it to {}",
            volume::archive_label(claim, path)
        ),
    }
}

/// The server's copy of an archive saved on its claim is of no more use: deleted (best
/// effort: one left is deleted with the Backup).
async fn delete_server_copy(backup: &Backup, job: &str, ctx: &Context) {
    let Ok((namespace, _, _)) = identity(backup, KIND) else {
        return;
    };
    let Ok(Some(cluster)) = cluster(ctx, &namespace, &backup.spec.cluster).await else {
        return;
    };
    let Ok(server) = ctx.servers.node_client_for(&ctx.client, &cluster).await else {
        return;
    };
    match server.delete_backup(job).await {
        Ok(()) | Err(RestError::NotFound { .. }) => {}
        Err(error) => {
            tracing::warn!(%namespace, %job, %error, "cannot delete the server's copy of a saved archive (it goes with the Backup)")
        }
    }
}

/// Deletes the server-side archive of a deleted Backup.
async fn cleanup(backup: &Backup, ctx: &Context) -> Result<Action, ReconcileError> {
    let (namespace, name, uid) = identity(backup, KIND)?;
    ctx.forget(&uid);
    let started = Progress::from(backup.status.clone().unwrap_or_default()).job_started();
    let job = names::backup_job(&namespace, &name, &uid);
    let cluster_name = &backup.spec.cluster;
    let Some(cluster) = cluster(ctx, &namespace, cluster_name).await? else {
        tracing::info!(%namespace, %name, cluster = %cluster_name, "Backup deleted; its cluster is gone, and its archive with it");
        return Ok(Action::await_change());
    };
    let failed = |source: CleanupError| ReconcileError::Cleanup {
        job: job.clone(),
        cluster: cluster_name.clone(),
        source: Box::new(source),
    };
    let server = match ctx.servers.node_client_for(&ctx.client, &cluster).await {
        Ok(server) => server,
        Err(_) if !started => return Ok(Action::await_change()),
        Err(error) => return Err(failed(error.into())),
    };
    match server.delete_backup(&job).await {
        Ok(()) => {
            tracing::info!(%namespace, %name, %job, "Backup deleted; its archive deleted on the server");
            Ok(Action::await_change())
        }
        Err(RestError::NotFound { .. }) => Ok(Action::await_change()),
        Err(_) if !started => Ok(Action::await_change()),
        Err(error) => Err(failed(error.into())),
    }
}
