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

use common_crds::backup::ArchiveVolume;
use common_crds::backup::Phase;
use common_crds::conditions::{ConditionType, find_condition};
use common_crds::{Backup, Restore};
use infinispan_rest::{BackupResources, Error as RestError, JobStatus};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::Action;
use kube::{Api, Resource};

use super::archive::{self, ArchiveFile};
use super::phase::{self, Failure, JobKind, Location, Observation, Progress, Waiting};
use super::schemas_step::{self, SchemasStep};
use super::selection;
use super::slots::Holder;
use super::volume::{self, Copy, JobState, Report};
use super::{
    Context, ReconcileError, access_waiting, cluster, conclude, copy_job, identity, job_server,
    names, rest_waiting,
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
        if current.volume.is_some() {
            copy_job::delete(&ctx, &namespace, &volume::job_name(&name, &uid, "upload")).await;
        }
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
    name: &str,
    namespace: &str,
    ctx: &Context,
) -> Result<Result<SucceededBackup, Observation>, ReconcileError> {
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

/// Where a Restore's archive is.
enum Source {
    /// On pod 0 of the Backup's cluster (`storage: ServerNode`): streamed through the operator.
    ServerNode {
        backup: String,
        backup_job: String,
        archive: Option<String>,
        cluster: String,
    },
    /// On a claim: uploaded by a Job ([`volume`]).
    Volume {
        volume: ArchiveVolume,
        /// The cluster it was taken from, when known (a Backup's, or the claim's label).
        cluster: Option<String>,
        /// What it is, for messages.
        what: String,
    },
}

impl Source {
    fn cluster(&self) -> Option<&str> {
        match self {
            Source::ServerNode { cluster, .. } => Some(cluster),
            Source::Volume { cluster, .. } => cluster.as_deref(),
        }
    }
}

/// The Restore's archive, or what to do while it is not there.
async fn source_of(
    restore: &Restore,
    namespace: &str,
    ctx: &Context,
) -> Result<Result<Source, Observation>, ReconcileError> {
    if let Some(name) = &restore.spec.backup {
        let SucceededBackup {
            backup,
            job,
            archive,
        } = match backup_of(name, namespace, ctx).await? {
            Ok(backup) => backup,
            Err(observation) => return Ok(Err(observation)),
        };
        let status = backup.status.clone().unwrap_or_default();
        // A Backup that succeeded without saying where its archive is was not taken by this
        // operator: infinispan-operator's, whose CR stays valid here; its archive is on the
        // claim of its name, in the same layout.
        let volume = status.volume.or_else(|| {
            status.archive.is_none().then(|| ArchiveVolume {
                claim_name: name.clone(),
                path: volume::archive_path(name),
                bytes: None,
                sha256: None,
            })
        });
        return Ok(Ok(match volume {
            Some(volume) => Source::Volume {
                volume,
                cluster: Some(backup.spec.cluster.clone()),
                what: format!("Backup {name}"),
            },
            None => Source::ServerNode {
                backup: name.clone(),
                backup_job: job,
                archive,
                cluster: backup.spec.cluster.clone(),
            },
        }));
    }
    let Some(source) = &restore.spec.source else {
        return Ok(Err(Observation::Failed {
            why: Failure::InvalidSelection,
            message: "the Restore names neither spec.backup nor spec.source".to_string(),
        }));
    };
    let claim_name = &source.persistent_volume_claim;
    let claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), namespace)
        .get_opt(claim_name)
        .await
        .map_err(ReconcileError::kube(format!(
            "reading the PersistentVolumeClaim {namespace}/{claim_name}"
        )))?;
    let Some(claim) = claim else {
        return Ok(Err(Observation::Waiting {
            why: Waiting::VolumeNotFound,
            message: format!(
                "there is no PersistentVolumeClaim {claim_name} in namespace {namespace} (spec.source)"
            ),
        }));
    };
    let path = source.archive_path();
    Ok(Ok(Source::Volume {
        what: volume::archive_label(claim_name, &path),
        volume: ArchiveVolume {
            claim_name: claim_name.clone(),
            path,
            bytes: None,
            sha256: None,
        },
        cluster: volume::claim_backed_up_cluster(&claim).map(str::to_string),
    }))
}

/// Starts the restore job (streaming the archive, or through a Job from a claim), or says why
/// it cannot start yet.
async fn start(restore: &Restore, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(restore, KIND)?;
    let source = match source_of(restore, &namespace, ctx).await? {
        Ok(source) => source,
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
    // Another cluster's data goes only into a cluster that says it takes it.
    if let Some(source_name) = source.cluster()
        && !target.spec.accepts_restores_from(target_name, source_name)
    {
        return Ok(Observation::Waiting {
            why: Waiting::RestoreNotAccepted,
            message: format!(
                "the cluster {target_name} does not accept restores of cluster {source_name}'s \
                 Backups: add {source_name} (or \"*\") to {target_name}'s \
                 spec.acceptRestoresFrom"
            ),
        });
    }
    let (backup_name, backup_job, archive, source_name) = match source {
        Source::ServerNode {
            backup,
            backup_job,
            archive,
            cluster,
        } => (backup, backup_job, archive, cluster),
        Source::Volume { volume, what, .. } => {
            let start = FromVolume {
                restore,
                job,
                volume,
                what,
                target: &target,
            };
            return start.run(ctx).await;
        }
    };
    let source_name = &source_name;
    let Some(source) = cluster(ctx, &namespace, source_name).await? else {
        return Ok(Observation::Failed {
            why: Failure::ArchiveUnavailable,
            message: format!(
                "the Infinispan cluster {source_name} that holds the archive of Backup {backup_name} no longer exists"
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
    if let Some(busy) = ctx.take_slot(&namespace, target_name, holder) {
        return Ok(busy);
    }
    let transfer = Transfer {
        restore,
        job,
        backup_job: &backup_job,
        archive: archive.map(Location::from),
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
pub(crate) struct Outcome {
    pub observation: Observation,
    /// A job of ours may still run on the target although the Restore has not started (its
    /// schemas step): the cluster stays held.
    pub job_on_target: bool,
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
    archive: Option<Location>,
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
        let note = format!("{size} bytes streamed from cluster {source_name}");
        let archive_name = format!(
            "Backup {}",
            restore.spec.backup.as_deref().unwrap_or_default()
        );
        let step = FromFile {
            target,
            file: file.path(),
            job,
            resources: restore.spec.resources.as_ref(),
            archive_name: &archive_name,
            target_context,
        };
        match step.run().await {
            Ok(started) => Observation::Started {
                archive,
                note: Some(format!("{started}; {note}")),
            }
            .into(),
            Err(outcome) => outcome,
        }
    }
}

/// A restore from an archive on a claim: the target reached, its job slot taken, then a Job
/// uploads the archive ([`volume`]); the Restore runs from then on, the Job looked at first.
struct FromVolume<'a> {
    restore: &'a Restore,
    job: &'a str,
    volume: ArchiveVolume,
    what: String,
    target: &'a common_crds::Infinispan,
}

impl FromVolume<'_> {
    async fn run(self, ctx: &Context) -> Result<Observation, ReconcileError> {
        let FromVolume {
            restore,
            job,
            volume,
            what,
            target,
        } = self;
        let (namespace, name, uid) = identity(restore, KIND)?;
        let target_name = &restore.spec.cluster;
        let target_context = format!("target cluster {target_name}: ");
        let server = match ctx.servers.node_client_for(&ctx.client, target).await {
            Ok(server) => server,
            Err(error) => return Ok(access_waiting(&target_context, &error)),
        };
        let holder = Holder {
            kind: JobKind::Restore,
            name: name.clone(),
            uid: uid.clone(),
        };
        if let Some(busy) = ctx.take_slot(&namespace, target_name, holder) {
            return Ok(busy);
        }
        let location = Location {
            label: volume::archive_label(&volume.claim_name, &volume.path),
            volume: Some(volume.clone()),
        };
        // A job of ours on the target already: the upload happened before a crash.
        match server.restore_status(job).await {
            Ok(_) => {
                return Ok(Observation::Started {
                    archive: Some(location),
                    note: Some(format!("restore job {job} found running on the server")),
                });
            }
            Err(RestError::NotFound { .. }) => {}
            Err(error) => {
                ctx.slots.release(&uid);
                return Ok(rest_waiting(&target_context, &error));
            }
        }
        let resources = restore
            .spec
            .resources
            .as_ref()
            .map(|r| serde_json::to_string(r).unwrap_or_default());
        let copy = Copy::Restore {
            job: job.to_string(),
            path: volume.path.clone(),
            resources,
        };
        let copy_name = volume::job_name(&name, &uid, "upload");
        let Some(owner) = restore.controller_owner_ref(&()) else {
            return Err(ReconcileError::MissingMetadata {
                kind: KIND,
                field: "uid",
            });
        };
        let created = copy_job::create(ctx, target, &copy_name, owner, &volume.claim_name, copy)
            .await
            .inspect_err(|_| ctx.slots.release(&uid))?;
        match created {
            Ok(()) => {
                ctx.stats
                    .jobs_started
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Observation::Started {
                    archive: Some(location),
                    note: Some(format!(
                        "restore job {job}: the Job {copy_name} uploads the archive of {what}"
                    )),
                })
            }
            Err(error) => {
                ctx.slots.release(&uid);
                Ok(access_waiting(&target_context, &error))
            }
        }
    }
}

/// A restore from an archive file: its listing, the selection checked against it, the schemas
/// step when needed, then the upload of the rest (the restore job started). Shared by the
/// operator (an archive it downloaded) and the restore Job (an archive on a claim,
/// [`super::archive_job`]).
pub(crate) struct FromFile<'a> {
    pub target: &'a infinispan_rest::Client,
    pub file: &'a std::path::Path,
    pub job: &'a str,
    pub resources: Option<&'a common_crds::common::SelectedResources>,
    /// What the archive is, for messages (`Backup x`, `pvc/c:path`).
    pub archive_name: &'a str,
    pub target_context: &'a str,
}

impl FromFile<'_> {
    /// `Ok`: the restore job was started (or was there already), with a note for the Event.
    pub(crate) async fn run(self) -> Result<String, Outcome> {
        let FromFile {
            target,
            file,
            job,
            resources,
            archive_name,
            target_context,
        } = self;
        let contents = match archive::contents(file).await {
            Ok(contents) => contents,
            Err(error) => {
                return Err(Observation::Failed {
                    why: Failure::InvalidArchive,
                    message: error.to_string(),
                }
                .into());
            }
        };
        let resources = match selection::restore_resources(resources, &contents) {
            Ok(resources) => resources,
            Err(error) => {
                return Err(Observation::Failed {
                    why: Failure::InvalidSelection,
                    message: format!("{archive_name}: {error}"),
                }
                .into());
            }
        };
        let selection::RestoreSteps { schemas, rest } = selection::restore_steps(resources);
        let mut note = format!("restore job {job}");
        if let Some(schemas) = schemas {
            let schemas_job = names::schemas_restore_job(job);
            note = format!("proto schemas restored first by restore job {schemas_job}; {note}");
            let step = SchemasStepJob {
                target,
                job: schemas_job,
                archive: file,
                resources: &schemas,
                target_context,
            };
            step.run().await?;
        }
        match target
            .start_restore_upload_file(job, file, Some(&rest))
            .await
        {
            Ok(()) | Err(RestError::AlreadyExists { .. }) => Ok(note),
            Err(error @ RestError::Rejected { .. }) => Err(Observation::Failed {
                why: Failure::ServerRejected,
                message: error.to_string(),
            }
            .into()),
            Err(error) => Err(rest_waiting(target_context, &error).into()),
        }
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

/// Looks at the Job uploading the archive (from a claim), then at the restore job.
async fn poll(restore: &Restore, job: &str, ctx: &Context) -> Result<Observation, ReconcileError> {
    let (namespace, name, uid) = identity(restore, KIND)?;
    let target_name = &restore.spec.cluster;
    let volume = restore.status.as_ref().and_then(|s| s.volume.as_ref());
    let copy_name = volume::job_name(&name, &uid, "upload");
    if let Some(volume) = volume
        && let Some(state) = copy_job::state(ctx, &namespace, &copy_name).await?
    {
        match state {
            JobState::Running => {
                return Ok(Observation::Copying {
                    message: format!(
                        "the Job {copy_name} uploads the archive from {}",
                        volume::archive_label(&volume.claim_name, &volume.path)
                    ),
                });
            }
            JobState::Finished(Report::Failed { reason, message }) => {
                return Ok(Observation::Failed {
                    why: Failure::from_reason(&reason),
                    message: format!("the Job {copy_name} uploading the archive: {message}"),
                });
            }
            JobState::Finished(Report::Started { .. } | Report::Saved { .. }) => {}
        }
    }
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
