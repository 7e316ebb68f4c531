//! The Restore controller's reconcile: wait for the Backup, stream its archive from the
//! source cluster's server to the target's, follow the restore job (see [`super`] for the
//! decisions).
//!
//! Steps of one reconcile:
//! 1. final phase: nothing;
//! 2. not started: the Backup (missing or not done: wait; failed: fail) -> the target cluster
//!    (missing: wait) -> the source cluster, the Backup's (gone: the archive is gone, fail) ->
//!    clients for both pods 0 -> the target's job slot -> a restore job of ours already on the
//!    target (a crash after the upload): adopted -> download the archive into a local file ->
//!    its listing -> the `resources` to restore, checked against it -> when they hold proto
//!    schemas and anything else, the schemas step: a job of its own restores the schemas alone
//!    (uploaded from the file unless the target has it already), waited for
//!    ([`schemas_step`]), its record deleted -> multipart upload of the restore job
//!    (the rest) from the file -> the file deleted;
//! 3. started: `HEAD` the restore job -> running / done / failed / unknown;
//! 4. [`phase::decide`] -> status, Event, requeue.

use std::sync::Arc;

use common_crds::backup::Phase;
use common_crds::conditions::{ConditionType, find_condition};
use common_crds::{Backup, Restore};
use infinispan_rest::{BackupResources, Error as RestError, JobStatus};
use kube::Api;
use kube::runtime::controller::Action;

use super::archive::{self, ArchiveFile};
use super::phase::{self, Failure, JobKind, Observation, Progress, Waiting};
use super::schemas_step::{self, SchemasStep};
use super::selection;
use super::slots::Holder;
use super::{
    Context, ReconcileError, access_waiting, cluster, conclude, identity, job_server, names,
    rest_waiting,
};

const KIND: &str = "Restore";

/// Reconciles one Restore.
pub(crate) async fn reconcile(
    restore: Arc<Restore>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    ctx.stats
        .restore_reconciles
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (namespace, name, uid) = identity(&*restore, KIND)?;
    let current = Progress::from(restore.status.clone().unwrap_or_default());
    if current.is_final() {
        ctx.forget(&uid);
        return Ok(Action::await_change());
    }
    let job = names::restore_job(&namespace, &name, &uid);
    let observation = if current.job_started() {
        poll(&restore, &job, ctx.as_ref()).await?
    } else {
        start(&restore, &job, ctx.as_ref()).await?
    };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let decision = phase::decide(
        JobKind::Restore,
        &current,
        restore.metadata.generation,
        observation,
        &now,
        ctx.attempt(&uid),
    );
    let api = Api::<Restore>::namespaced(ctx.client.clone(), &namespace);
    conclude(&ctx, &api, restore.as_ref(), &current, decision, |p| {
        serde_json::to_value(common_crds::RestoreStatus::from(p)).unwrap_or_default()
    })
    .await
}

/// The Backup a Restore restores, once it succeeded: its server job and archive.
struct SucceededBackup {
    backup: Backup,
    job: String,
    archive: Option<String>,
}

/// The Restore's Backup, or what to do while it is not ready.
async fn backup_of(
    restore: &Restore,
    namespace: &str,
    ctx: &Context,
) -> Result<Result<SucceededBackup, Observation>, ReconcileError> {
    let name = &restore.spec.backup;
    let found = Api::<Backup>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(ReconcileError::kube(format!(
            "reading the Backup {namespace}/{name}"
        )))?;
    let Some(backup) = found else {
        return Ok(Err(Observation::Waiting {
            why: Waiting::BackupNotFound,
            message: format!("there is no Backup {name} in namespace {namespace}"),
        }));
    };
    let progress = Progress::from(backup.status.clone().unwrap_or_default());
    match progress.phase {
        Some(Phase::Succeeded) => {}
        Some(Phase::Failed) => {
            let why = find_condition(&progress.conditions, ConditionType::Failed)
                .map(|c| format!(": {}", c.message))
                .unwrap_or_default();
            return Ok(Err(Observation::Failed {
                why: Failure::BackupFailed,
                message: format!("the Backup {name} failed{why}"),
            }));
        }
        Some(Phase::Pending | Phase::Running) | None => {
            let phase = match progress.phase {
                Some(Phase::Running) => "Running",
                _ => "Pending",
            };
            return Ok(Err(Observation::Waiting {
                why: Waiting::BackupNotComplete,
                message: format!("the Backup {name} is {phase}"),
            }));
        }
    }
    let (backup_namespace, backup_name, backup_uid) = identity(&backup, "Backup")?;
    Ok(Ok(SucceededBackup {
        job: names::backup_job(&backup_namespace, &backup_name, &backup_uid),
        archive: progress.archive,
        backup,
    }))
}

/// Streams the archive and starts the restore job, or says why it cannot start yet.
async fn start(restore: &Restore, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(restore, KIND)?;
    let SucceededBackup {
        backup,
        job: backup_job,
        archive,
    } = match backup_of(restore, &namespace, ctx).await? {
        Ok(backup) => backup,
        Err(observation) => return Ok(observation),
    };
    let target_name = &restore.spec.cluster;
    let Some(target) = cluster(ctx, &namespace, target_name).await? else {
        return Ok(Observation::Waiting {
            why: Waiting::ClusterNotFound,
            message: format!(
                "there is no Infinispan cluster {target_name} in namespace {namespace}"
            ),
        });
    };
    let source_name = &backup.spec.cluster;
    // Another cluster's data goes only into a cluster that says it takes it.
    if !target.spec.accepts_restores_from(target_name, source_name) {
        return Ok(Observation::Waiting {
            why: Waiting::RestoreNotAccepted,
            message: format!(
                "the cluster {target_name} does not accept restores of cluster {source_name}'s \
                 Backups: add {source_name} (or \"*\") to {target_name}'s \
                 spec.acceptRestoresFrom"
            ),
        });
    }
    let Some(source) = cluster(ctx, &namespace, source_name).await? else {
        return Ok(Observation::Failed {
            why: Failure::ArchiveUnavailable,
            message: format!(
                "the Infinispan cluster {source_name} that holds the archive of Backup {} no longer exists",
                restore.spec.backup
            ),
        });
    };
    let target_context = format!("target cluster {target_name}: ");
    let source_context = format!("source cluster {source_name}: ");
    let target_server = match ctx.servers.node_client_for(&ctx.client, &target).await {
        Ok(server) => server,
        Err(error) => return Ok(access_waiting(&target_context, &error)),
    };
    let source_server = match ctx.servers.node_client_for(&ctx.client, &source).await {
        Ok(server) => server,
        Err(error) => return Ok(access_waiting(&source_context, &error)),
    };
    let holder = Holder {
        kind: JobKind::Restore,
        name,
        uid: uid.clone(),
    };
    let running = ctx.running_on(&namespace, target_name, &uid);
    if let Err(other) = ctx
        .slots
        .try_acquire(&namespace, target_name, holder, running)
    {
        return Ok(Observation::Waiting {
            why: Waiting::ClusterBusy,
            message: format!(
                "{other} runs on cluster {target_name}: one backup or restore runs at a time per cluster"
            ),
        });
    }
    let transfer = Transfer {
        restore,
        job,
        backup_job: &backup_job,
        archive,
        source_name,
        target_context: &target_context,
        source_context: &source_context,
        ctx,
    };
    let Outcome {
        observation,
        job_on_target,
    } = transfer.run(&source_server, &target_server).await;
    if matches!(observation, Observation::Started { .. }) {
        ctx.stats
            .jobs_started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    } else if !job_on_target {
        ctx.slots.release(&uid);
    }
    Ok(observation)
}

/// What a [`Transfer`] comes to.
struct Outcome {
    observation: Observation,
    /// A job of ours may still run on the target although the Restore has not started (its
    /// schemas step): the cluster stays held.
    job_on_target: bool,
}

impl From<Observation> for Outcome {
    fn from(observation: Observation) -> Self {
        Outcome {
            observation,
            job_on_target: false,
        }
    }
}

/// One transfer of an archive from the source server to the target.
struct Transfer<'a> {
    restore: &'a Restore,
    job: &'a str,
    backup_job: &'a str,
    archive: Option<String>,
    source_name: &'a str,
    target_context: &'a str,
    source_context: &'a str,
    ctx: &'a Context,
}

impl Transfer<'_> {
    async fn run(
        self,
        source: &infinispan_rest::Client,
        target: &infinispan_rest::Client,
    ) -> Outcome {
        let Transfer {
            restore,
            job,
            backup_job,
            archive,
            source_name,
            target_context,
            source_context,
            ctx,
        } = self;
        // A job of ours on the target already: the upload happened before a crash.
        match target.restore_status(job).await {
            Ok(_) => {
                return Observation::Started {
                    archive,
                    note: Some(format!("restore job {job} found running on the server")),
                }
                .into();
            }
            Err(RestError::NotFound { .. }) => {}
            Err(error) => return rest_waiting(target_context, &error).into(),
        }
        let file = ArchiveFile::new(&ctx.archive_dir, job);
        let size = match file
            .download(source, backup_job, ctx.archive_max_bytes)
            .await
        {
            Ok(size) => size,
            Err(RestError::ResponseTooLarge { .. }) => {
                return Observation::Failed {
                    why: Failure::ArchiveTooLarge,
                    message: format!(
                        "the archive of backup job {backup_job} on cluster {source_name} is \
                         larger than {} bytes, the most the operator downloads: raise \
                         --archive-max-bytes (Helm: archiveMaxBytes) together with the size \
                         limit of its archive directory (Helm: tmpSizeLimit)",
                        ctx.archive_max_bytes
                    ),
                }
                .into();
            }
            Err(RestError::NotFound { .. }) => {
                return Observation::Failed {
                    why: Failure::ArchiveUnavailable,
                    message: format!(
                        "the server of cluster {source_name} no longer has backup job {backup_job}: its node restarted since the backup (Infinispan forgets its backups on restart; the zip stays in its data/backups directory) or the archive was deleted"
                    ),
                }
                .into();
            }
            Err(error) => return rest_waiting(source_context, &error).into(),
        };
        let contents = match archive::contents(file.path()).await {
            Ok(contents) => contents,
            Err(error) => {
                return Observation::Failed {
                    why: Failure::InvalidArchive,
                    message: error.to_string(),
                }
                .into();
            }
        };
        let resources =
            match selection::restore_resources(restore.spec.resources.as_ref(), &contents) {
                Ok(resources) => resources,
                Err(error) => {
                    return Observation::Failed {
                        why: Failure::InvalidSelection,
                        message: format!("Backup {}: {error}", restore.spec.backup),
                    }
                    .into();
                }
            };
        let selection::RestoreSteps { schemas, rest } = selection::restore_steps(resources);
        let mut note =
            format!("restore job {job}: {size} bytes streamed from cluster {source_name}");
        if let Some(schemas) = schemas {
            let schemas_job = names::schemas_restore_job(job);
            note = format!("proto schemas restored first by restore job {schemas_job}; {note}");
            let step = SchemasStepJob {
                target,
                job: schemas_job,
                archive: file.path(),
                resources: &schemas,
                target_context,
            };
            if let Err(outcome) = step.run().await {
                return outcome;
            }
        }
        match target
            .start_restore_upload_file(job, file.path(), Some(&rest))
            .await
        {
            Ok(()) | Err(RestError::AlreadyExists { .. }) => Observation::Started {
                archive,
                note: Some(note),
            },
            Err(error @ RestError::Rejected { .. }) => Observation::Failed {
                why: Failure::ServerRejected,
                message: error.to_string(),
            },
            Err(error) => rest_waiting(target_context, &error),
        }
        .into()
    }
}

/// The schemas step of a restore ([`selection::RestoreSteps`]): its job restores the proto
/// schemas alone, before the restore job of the rest is started. Re-running it (after a
/// crash, or a wait that timed out) is harmless: a restored schema overwrites its own copy.
struct SchemasStepJob<'a> {
    target: &'a infinispan_rest::Client,
    job: String,
    archive: &'a std::path::Path,
    resources: &'a BackupResources,
    target_context: &'a str,
}

impl SchemasStepJob<'_> {
    /// Starts the job unless the target has it already (an earlier attempt), waits for it
    /// (every [`schemas_step::SCHEMAS_POLL`], at most [`schemas_step::SCHEMAS_WAIT`]), deletes its record
    /// once done. `Err`: what the Restore comes to instead of starting.
    async fn run(self) -> Result<(), Outcome> {
        let SchemasStepJob {
            target,
            job,
            archive,
            resources,
            target_context,
        } = self;
        let context = format!("{target_context}the schemas step (restore job {job}): ");
        let deadline = tokio::time::Instant::now() + schemas_step::SCHEMAS_WAIT;
        // Whether the job is (or may be) on the target.
        let mut started = false;
        loop {
            let status = match target.restore_status(&job).await {
                Ok(status) => Some(status),
                Err(RestError::NotFound { .. }) => None,
                Err(error) => {
                    return Err(Outcome {
                        observation: rest_waiting(&context, &error),
                        job_on_target: started,
                    });
                }
            };
            if status.is_none() && !started {
                started = true;
                match target
                    .start_restore_upload_file(&job, archive, Some(resources))
                    .await
                {
                    Ok(()) | Err(RestError::AlreadyExists { .. }) => continue,
                    Err(error @ RestError::Rejected { .. }) => {
                        return Err(Observation::Failed {
                            why: Failure::ServerRejected,
                            message: format!("the schemas step: {error}"),
                        }
                        .into());
                    }
                    Err(error) => {
                        return Err(Outcome {
                            observation: rest_waiting(&context, &error),
                            job_on_target: true,
                        });
                    }
                }
            }
            started = true;
            match schemas_step::schemas_step(&job, status) {
                SchemasStep::Done => break,
                SchemasStep::Stop(observation) => return Err(observation.into()),
                SchemasStep::Running => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Outcome {
                    observation: schemas_step::schemas_waited_too_long(&job),
                    job_on_target: true,
                });
            }
            tokio::time::sleep(schemas_step::SCHEMAS_POLL).await;
        }
        // Done: its record is of no use (an attempt after a crash restores the schemas again).
        match target.delete_restore(&job).await {
            Ok(()) | Err(RestError::NotFound { .. }) => {}
            Err(error) => {
                tracing::warn!(%job, %error, "cannot delete the finished restore job of a schemas step")
            }
        }
        Ok(())
    }
}

/// Looks at the restore job.
async fn poll(restore: &Restore, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(restore, KIND)?;
    let target_name = &restore.spec.cluster;
    let holder = Holder {
        kind: JobKind::Restore,
        name,
        uid,
    };
    let server = match job_server(ctx, &namespace, target_name, job, holder).await? {
        Ok(server) => server,
        Err(observation) => return Ok(observation),
    };
    Ok(match server.restore_status(job).await {
        Ok(JobStatus::Running) => Observation::Running,
        Ok(JobStatus::Done) => Observation::Succeeded { archive: None },
        Ok(JobStatus::Failed) => Observation::Failed {
            why: Failure::ServerFailed,
            message: format!(
                "the server reports restore job {job} failed (HTTP 500); Infinispan gives no reason over REST: the cause (ISPN005040 and what follows) is in the log of the target's pod 0"
            ),
        },
        Err(RestError::NotFound { .. }) => Observation::Failed {
            why: Failure::JobLost,
            message: format!(
                "the server no longer knows restore job {job}: its node restarted while the restore ran, or the restore failed before it was registered"
            ),
        },
        Err(error) => Observation::Unreachable {
            message: error.to_string(),
        },
    })
}
