//! The pure core of both controllers: given a Backup's or Restore's status and what the
//! reconcile found out ([`Observation`]), the next status, when to look again and which Event
//! to publish ([`decide`]). No I/O.
//!
//! Phases: `Pending` (not started: waiting, with the reason in the `Complete=False`
//! condition) -> `Running` (the server job exists; `startTime`) -> `Succeeded`
//! (`Complete=True`, `completionTime`, `archive`) or `Failed` (`Failed=True` with the reason
//! and the server's message, `Complete=False`, `completionTime`). `Succeeded` and `Failed` are
//! final. Nothing ever makes a waiting object `Failed`: only the server (or a request that can
//! never succeed, e.g. a Restore of a failed Backup) does.
//!
//! Conditions (types `Complete` and `Failed`, with `observedGeneration`; `lastTransitionTime`
//! moves only when the status changes, [`common_crds::conditions::set_condition`]):
//!
//! | phase | `Complete` | `Failed` |
//! |---|---|---|
//! | Pending | False, a [`Waiting`] reason | - |
//! | Running | False, `Running`, or `ServerUnavailable` while the server cannot be asked | - |
//! | Succeeded | True, `Succeeded` | - |
//! | Failed | False, `Failed` | True, a [`Failure`] reason |
//!
//! Messages hold no times or counters, so a retry that finds the same thing writes nothing
//! (design L1, idle: no writes). Timing: a waiting object is retried after [`retry_delay`] (2 s
//! doubling to 5 min by attempt; a busy cluster after [`BUSY_DELAY`]); a running job is polled
//! after [`poll_delay`] (a quarter of its age, 1 to 30 s). Watches wake waiting objects earlier
//! when what they wait for changes (their cluster, their Backup).
//!
//! The schemas step of a Restore (its proto schemas restored by a job of their own before the
//! rest, `selection::restore_steps`) is waited for within the reconcile that starts the
//! Restore: polled every [`SCHEMAS_POLL`], at most [`SCHEMAS_WAIT`] ([`schemas_step`], which
//! uses this module's types); still running then, the Restore waits (`RestoringSchemas`,
//! retried with backoff).
//!
//! [`SCHEMAS_POLL`]: super::schemas_step::SCHEMAS_POLL
//! [`SCHEMAS_WAIT`]: super::schemas_step::SCHEMAS_WAIT
//! [`schemas_step`]: super::schemas_step

use std::time::Duration;

use common_crds::backup::{ArchiveVolume, BackupStatus, Phase};
use common_crds::conditions::{
    ConditionStatus, ConditionType, new_condition, remove_condition, set_condition,
};
use common_crds::restore::RestoreStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Backup or Restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Backup,
    Restore,
}

impl JobKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Backup => "Backup",
            Self::Restore => "Restore",
        }
    }

    pub(super) const fn lower(self) -> &'static str {
        match self {
            Self::Backup => "backup",
            Self::Restore => "restore",
        }
    }
}

/// The status fields Backup and Restore share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub phase: Option<Phase>,
    pub conditions: Vec<Condition>,
    pub observed_generation: Option<i64>,
    pub archive: Option<String>,
    pub volume: Option<ArchiveVolume>,
    pub start_time: Option<Time>,
    pub completion_time: Option<Time>,
}

impl Progress {
    /// Records where the archive is, when known.
    fn locate(&mut self, archive: Option<Location>) {
        if let Some(Location { label, volume }) = archive {
            self.archive = Some(label);
            if volume.is_some() {
                self.volume = volume;
            }
        }
    }

    /// Succeeded or Failed: nothing more happens.
    pub fn is_final(&self) -> bool {
        matches!(self.phase, Some(Phase::Succeeded | Phase::Failed))
    }

    /// Whether the server job was started (the phase says so).
    pub fn job_started(&self) -> bool {
        matches!(
            self.phase,
            Some(Phase::Running | Phase::Succeeded | Phase::Failed)
        )
    }
}

macro_rules! progress_conversions {
    ($($status:ident),*) => {$(
        impl From<$status> for Progress {
            fn from(status: $status) -> Self {
                let $status {
                    phase,
                    conditions,
                    observed_generation,
                    archive,
                    volume,
                    start_time,
                    completion_time,
                } = status;
                Progress {
                    phase,
                    conditions,
                    observed_generation,
                    archive,
                    volume,
                    start_time,
                    completion_time,
                }
            }
        }

        impl From<Progress> for $status {
            fn from(progress: Progress) -> Self {
                let Progress {
                    phase,
                    conditions,
                    observed_generation,
                    archive,
                    volume,
                    start_time,
                    completion_time,
                } = progress;
                $status {
                    phase,
                    conditions,
                    observed_generation,
                    archive,
                    volume,
                    start_time,
                    completion_time,
                }
            }
        }
    )*};
}

progress_conversions!(BackupStatus, RestoreStatus);

/// Why a job has not started yet (the `Complete=False` reason while Pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// No `Infinispan` CR of that name in the namespace (yet).
    ClusterNotFound,
    /// The cluster's status names no operator credentials Secret yet.
    CredentialsNotReady,
    /// The credentials Secret is missing or lacks a key.
    CredentialsInvalid,
    /// The endpoint certificate Secret is missing.
    CertificateNotFound,
    /// The server answers with 401/403 for the operator's credentials.
    AccessDenied,
    /// The server cannot be reached, or answered with an error worth retrying.
    ServerUnavailable,
    /// Another backup or restore of this operator runs on the cluster.
    ClusterBusy,
    /// The Restore's Backup does not exist (yet).
    BackupNotFound,
    /// The Restore's Backup has not succeeded yet.
    BackupNotComplete,
    /// The archive could not be stored locally (the operator's archive directory).
    LocalStorage,
    /// The operator cannot be configured for this cluster (bad cluster domain, CA bundle).
    InvalidConfiguration,
    /// The Restore's schemas step (its proto schemas, restored before the rest) still runs.
    RestoringSchemas,
    /// The target cluster does not accept restores of the source cluster's Backups (its
    /// `spec.acceptRestoresFrom`).
    RestoreNotAccepted,
    /// The Restore's `spec.source` claim does not exist (yet).
    VolumeNotFound,
}

impl Waiting {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ClusterNotFound => "ClusterNotFound",
            Self::CredentialsNotReady => "CredentialsNotReady",
            Self::CredentialsInvalid => "CredentialsInvalid",
            Self::CertificateNotFound => "CertificateNotFound",
            Self::AccessDenied => "AccessDenied",
            Self::ServerUnavailable => "ServerUnavailable",
            Self::ClusterBusy => "ClusterBusy",
            Self::BackupNotFound => "BackupNotFound",
            Self::BackupNotComplete => "BackupNotComplete",
            Self::LocalStorage => "LocalStorage",
            Self::InvalidConfiguration => "InvalidConfiguration",
            Self::RestoringSchemas => "RestoringSchemas",
            Self::RestoreNotAccepted => "RestoreNotAccepted",
            Self::VolumeNotFound => "VolumeNotFound",
        }
    }
}

/// Why a job failed (the `Failed=True` reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server ran the job and reports it failed.
    ServerFailed,
    /// The server refused to start the job.
    ServerRejected,
    /// The server no longer knows the job (its node restarted), or the cluster is gone.
    JobLost,
    /// The Restore's Backup failed.
    BackupFailed,
    /// The Backup's archive can no longer be read from the source cluster.
    ArchiveUnavailable,
    /// The selection cannot be served: nothing selected, or names not in the archive.
    InvalidSelection,
    /// The downloaded archive is not a readable zip.
    InvalidArchive,
    /// The archive is larger than the operator downloads (its archive bound).
    ArchiveTooLarge,
    /// The Job copying the archive between the server and its claim failed.
    CopyFailed,
    /// A PersistentVolumeClaim of the Backup's name exists that is not the Backup's.
    VolumeConflict,
}

impl Failure {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ServerFailed => "ServerFailed",
            Self::ServerRejected => "ServerRejected",
            Self::JobLost => "JobLost",
            Self::BackupFailed => "BackupFailed",
            Self::ArchiveUnavailable => "ArchiveUnavailable",
            Self::InvalidSelection => "InvalidSelection",
            Self::InvalidArchive => "InvalidArchive",
            Self::ArchiveTooLarge => "ArchiveTooLarge",
            Self::CopyFailed => "CopyFailed",
            Self::VolumeConflict => "VolumeConflict",
        }
    }

    /// The failure a copy Job reported by its reason; one it cannot name is `CopyFailed`.
    pub fn from_reason(reason: &str) -> Self {
        [
            Self::ServerFailed,
            Self::ServerRejected,
            Self::JobLost,
            Self::BackupFailed,
            Self::ArchiveUnavailable,
            Self::InvalidSelection,
            Self::InvalidArchive,
            Self::ArchiveTooLarge,
            Self::VolumeConflict,
        ]
        .into_iter()
        .find(|f| f.as_str() == reason)
        .unwrap_or(Self::CopyFailed)
    }
}

/// Where an archive is: for people (the status' `archive`), and its claim when it is on one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub label: String,
    pub volume: Option<ArchiveVolume>,
}

impl From<String> for Location {
    fn from(label: String) -> Self {
        Location {
            label,
            volume: None,
        }
    }
}

impl From<&str> for Location {
    fn from(label: &str) -> Self {
        label.to_string().into()
    }
}

/// What one reconcile found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The job cannot start yet.
    Waiting { why: Waiting, message: String },
    /// The server job was started now (or found started: adopted). `note` says more in the
    /// Event (e.g. caches left out).
    Started {
        archive: Option<Location>,
        note: Option<String>,
    },
    /// The server job runs.
    Running,
    /// The job is running but its server cannot be asked right now.
    Unreachable { message: String },
    /// The job finished successfully.
    Succeeded { archive: Option<Location> },
    /// The server job is done and a Job copies the archive between the server and a claim.
    Copying { message: String },
    /// The job failed, or can never run.
    Failed { why: Failure, message: String },
}

/// What happens with the CR.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The status to have (written only when it differs from the current one).
    pub progress: Progress,
    /// Look again after this long; `None`: only when something changes.
    pub requeue: Option<Duration>,
    /// An Event to publish.
    pub event: Option<EventSpec>,
    /// Whether the retry counter of the object goes up (waiting) or back to zero.
    pub retrying: bool,
}

/// An Event to publish about the CR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    pub warning: bool,
    /// `<Kind><What>`, e.g. `BackupStarted`.
    pub reason: String,
    pub note: String,
}

/// Waiting objects: 2 s, doubling per attempt, at most 5 min.
pub fn retry_delay(attempt: u32) -> Duration {
    const FIRST: u64 = 2;
    const MAX: u64 = 300;
    Duration::from_secs(FIRST.saturating_mul(1u64 << attempt.min(16)).min(MAX))
}

/// A cluster busy with another job is asked again after this long (no server request is made
/// while waiting for it).
pub const BUSY_DELAY: Duration = Duration::from_secs(5);

/// Polling a running job: a quarter of its age, between 1 and 30 s.
pub fn poll_delay(age: Duration) -> Duration {
    (age / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

fn age(start: Option<&Time>, now: &Time) -> Duration {
    start
        .and_then(|s| now.0.duration_since(s.0).try_into().ok())
        .unwrap_or_default()
}

fn condition(
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    new_condition(type_, status, reason, message, generation, now.clone())
}

fn running_message(kind: JobKind) -> String {
    format!("the server runs the {}", kind.lower())
}

/// The next status of a Backup or Restore (`kind`) of `generation`, whose current status is
/// `current`, after `observation`, at `now`; `attempt` counts the retries so far. A final
/// status stays; otherwise one step per kind of observation (`Step`).
pub fn decide(
    kind: JobKind,
    current: &Progress,
    generation: Option<i64>,
    observation: Observation,
    now: &Time,
    attempt: u32,
) -> Decision {
    let mut next = current.clone();
    next.observed_generation = generation;
    if current.is_final() {
        return Decision {
            progress: current.clone(),
            requeue: None,
            event: None,
            retrying: false,
        };
    }
    let step = Step {
        kind,
        current,
        generation,
        now,
    };
    match observation {
        Observation::Waiting { why, message } => step.waiting(next, why, message, attempt),
        Observation::Started { archive, note } => step.started(next, archive, note),
        Observation::Running => step.running(next),
        Observation::Unreachable { message } => step.unreachable(next, message, attempt),
        Observation::Succeeded { archive } => step.succeeded(next, archive),
        Observation::Copying { message } => step.copying(next, message),
        Observation::Failed { why, message } => step.failed(next, why, message),
    }
}

/// What every step of [`decide`] knows: the object's kind, its current status, the generation
/// observed and the time.
struct Step<'a> {
    kind: JobKind,
    current: &'a Progress,
    generation: Option<i64>,
    now: &'a Time,
}

impl Step<'_> {
    /// The `Complete` condition with `status`, `reason` and `message`.
    fn complete(&self, status: ConditionStatus, reason: &str, message: String) -> Condition {
        condition(
            ConditionType::Complete,
            status,
            reason,
            message,
            self.generation,
            self.now,
        )
    }

    /// An Event `<Kind><what>`.
    fn event(&self, warning: bool, what: &str, note: String) -> Option<EventSpec> {
        Some(EventSpec {
            warning,
            reason: format!("{}{what}", self.kind.as_str()),
            note,
        })
    }

    /// The job cannot start yet: Pending with the reason, retried with backoff; one Event per
    /// new reason.
    fn waiting(&self, mut next: Progress, why: Waiting, message: String, attempt: u32) -> Decision {
        next.phase = Some(Phase::Pending);
        let changed_reason = self
            .current
            .conditions
            .iter()
            .find(|c| c.type_ == ConditionType::Complete.as_str())
            .is_none_or(|c| c.reason != why.as_str());
        set_condition(
            &mut next.conditions,
            self.complete(ConditionStatus::False, why.as_str(), message.clone()),
        );
        let requeue = match why {
            Waiting::ClusterBusy => BUSY_DELAY,
            _ => retry_delay(attempt),
        };
        Decision {
            progress: next,
            requeue: Some(requeue),
            // One Event per new reason, not per retry.
            event: if changed_reason {
                self.event(false, "Waiting", format!("{}: {message}", why.as_str()))
            } else {
                None
            },
            retrying: true,
        }
    }

    /// The server job was started (or adopted): Running from now, polled soon.
    fn started(
        &self,
        mut next: Progress,
        archive: Option<Location>,
        note: Option<String>,
    ) -> Decision {
        next.phase = Some(Phase::Running);
        if next.start_time.is_none() {
            next.start_time = Some(self.now.clone());
        }
        next.locate(archive);
        let message = running_message(self.kind);
        set_condition(
            &mut next.conditions,
            self.complete(ConditionStatus::False, "Running", message.clone()),
        );
        let note = match note {
            Some(note) => format!("{message}; {note}"),
            None => message,
        };
        Decision {
            progress: next,
            requeue: Some(poll_delay(Duration::ZERO)),
            event: self.event(false, "Started", note),
            retrying: false,
        }
    }

    /// The job runs: polled after a quarter of its age.
    fn running(&self, mut next: Progress) -> Decision {
        next.phase = Some(Phase::Running);
        set_condition(
            &mut next.conditions,
            self.complete(
                ConditionStatus::False,
                "Running",
                running_message(self.kind),
            ),
        );
        Decision {
            requeue: Some(poll_delay(age(next.start_time.as_ref(), self.now))),
            progress: next,
            event: None,
            retrying: false,
        }
    }

    /// The job's server cannot be asked: the phase stays, retried (at most every minute).
    fn unreachable(&self, mut next: Progress, message: String, attempt: u32) -> Decision {
        // Running stays Running: the job may well go on without us.
        if next.phase.is_none() {
            next.phase = Some(Phase::Pending);
        }
        set_condition(
            &mut next.conditions,
            self.complete(
                ConditionStatus::False,
                Waiting::ServerUnavailable.as_str(),
                message,
            ),
        );
        Decision {
            progress: next,
            requeue: Some(retry_delay(attempt).min(Duration::from_secs(60))),
            event: None,
            retrying: true,
        }
    }

    /// The server job is done, a Job copies the archive: still Running, polled like the job.
    fn copying(&self, mut next: Progress, message: String) -> Decision {
        next.phase = Some(Phase::Running);
        set_condition(
            &mut next.conditions,
            self.complete(ConditionStatus::False, "CopyingArchive", message),
        );
        Decision {
            requeue: Some(poll_delay(age(next.start_time.as_ref(), self.now))),
            progress: next,
            event: None,
            retrying: false,
        }
    }

    /// The job succeeded: final, with the archive.
    fn succeeded(&self, mut next: Progress, archive: Option<Location>) -> Decision {
        next.phase = Some(Phase::Succeeded);
        next.completion_time = Some(self.now.clone());
        next.locate(archive);
        let message = match &next.archive {
            Some(a) => format!("the {} completed; archive {a}", self.kind.lower()),
            None => format!("the {} completed", self.kind.lower()),
        };
        set_condition(
            &mut next.conditions,
            self.complete(ConditionStatus::True, "Succeeded", message.clone()),
        );
        remove_condition(&mut next.conditions, ConditionType::Failed);
        Decision {
            progress: next,
            requeue: None,
            event: self.event(false, "Succeeded", message),
            retrying: false,
        }
    }

    /// The job failed or can never run: final, with the reason and the server's message.
    fn failed(&self, mut next: Progress, why: Failure, message: String) -> Decision {
        next.phase = Some(Phase::Failed);
        next.completion_time = Some(self.now.clone());
        set_condition(
            &mut next.conditions,
            self.complete(
                ConditionStatus::False,
                "Failed",
                format!("the {} failed: see the Failed condition", self.kind.lower()),
            ),
        );
        set_condition(
            &mut next.conditions,
            condition(
                ConditionType::Failed,
                ConditionStatus::True,
                why.as_str(),
                message.clone(),
                self.generation,
                self.now,
            ),
        );
        Decision {
            progress: next,
            requeue: None,
            event: self.event(true, "Failed", format!("{}: {message}", why.as_str())),
            retrying: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::conditions::find_condition;
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("valid"))
    }

    fn waiting(why: Waiting, message: &str) -> Observation {
        Observation::Waiting {
            why,
            message: message.into(),
        }
    }

    fn complete(p: &Progress) -> &Condition {
        find_condition(&p.conditions, ConditionType::Complete).expect("Complete")
    }

    #[test]
    fn waiting_is_pending_with_the_reason_and_backs_off() {
        let d = decide(
            JobKind::Backup,
            &Progress::default(),
            Some(1),
            waiting(Waiting::ClusterNotFound, "no Infinispan CR 'c'"),
            &at(10),
            0,
        );
        assert_eq!(d.progress.phase, Some(Phase::Pending));
        assert_eq!(d.progress.observed_generation, Some(1));
        let c = complete(&d.progress);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("False", "ClusterNotFound", "no Infinispan CR 'c'")
        );
        assert_eq!(d.requeue, Some(Duration::from_secs(2)));
        assert!(d.retrying);
        assert_eq!(
            d.event.as_ref().map(|e| (e.warning, e.reason.as_str())),
            Some((false, "BackupWaiting"))
        );

        // The same again, later: the status is the same (nothing to write), no Event, longer wait.
        let again = decide(
            JobKind::Backup,
            &d.progress,
            Some(1),
            waiting(Waiting::ClusterNotFound, "no Infinispan CR 'c'"),
            &at(20),
            3,
        );
        assert_eq!(again.progress, d.progress);
        assert_eq!(again.event, None);
        assert_eq!(again.requeue, Some(Duration::from_secs(16)));
        // A new reason keeps the transition time (status stays False) and gives one Event.
        let other = decide(
            JobKind::Backup,
            &d.progress,
            Some(1),
            waiting(Waiting::CredentialsNotReady, "no Secret yet"),
            &at(30),
            4,
        );
        assert_eq!(complete(&other.progress).last_transition_time, at(10));
        assert!(other.event.is_some());
        // A busy cluster is asked again soon, whatever the attempt.
        let busy = decide(
            JobKind::Restore,
            &d.progress,
            Some(1),
            waiting(Waiting::ClusterBusy, "Backup b runs"),
            &at(40),
            12,
        );
        assert_eq!(busy.requeue, Some(BUSY_DELAY));
    }

    #[test]
    fn the_retry_and_poll_delays_are_bounded() {
        assert_eq!(retry_delay(0), Duration::from_secs(2));
        assert_eq!(retry_delay(1), Duration::from_secs(4));
        assert_eq!(retry_delay(7), Duration::from_secs(256));
        assert_eq!(retry_delay(8), Duration::from_secs(300));
        assert_eq!(retry_delay(u32::MAX), Duration::from_secs(300));
        assert_eq!(poll_delay(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(poll_delay(Duration::from_secs(20)), Duration::from_secs(5));
        assert_eq!(
            poll_delay(Duration::from_secs(3600)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn a_backup_runs_then_succeeds() {
        let started = decide(
            JobKind::Backup,
            &Progress::default(),
            Some(1),
            Observation::Started {
                archive: None,
                note: Some("left out: a/b".into()),
            },
            &at(100),
            5,
        );
        let p = &started.progress;
        assert_eq!(p.phase, Some(Phase::Running));
        assert_eq!(p.start_time, Some(at(100)));
        assert!(!started.retrying);
        assert_eq!(complete(p).reason, "Running");
        let e = started.event.clone().expect("event");
        assert_eq!(e.reason, "BackupStarted");
        assert!(e.note.contains("left out: a/b"), "{}", e.note);

        let polled = decide(
            JobKind::Backup,
            p,
            Some(1),
            Observation::Running,
            &at(140),
            0,
        );
        assert_eq!(
            &polled.progress, p,
            "a poll that finds it running writes nothing"
        );
        assert_eq!(polled.requeue, Some(Duration::from_secs(10)));
        assert_eq!(polled.event, None);

        let unreachable = decide(
            JobKind::Backup,
            p,
            Some(1),
            Observation::Unreachable {
                message: "connection refused".into(),
            },
            &at(150),
            9,
        );
        assert_eq!(unreachable.progress.phase, Some(Phase::Running));
        assert_eq!(complete(&unreachable.progress).reason, "ServerUnavailable");
        assert_eq!(unreachable.requeue, Some(Duration::from_secs(60)));

        let done = decide(
            JobKind::Backup,
            &unreachable.progress,
            Some(1),
            Observation::Succeeded {
                archive: Some("src:ns.b-0123".into()),
            },
            &at(160),
            0,
        );
        let p = &done.progress;
        assert_eq!(p.phase, Some(Phase::Succeeded));
        assert_eq!(p.archive.as_deref(), Some("src:ns.b-0123"));
        assert_eq!(p.start_time, Some(at(100)));
        assert_eq!(p.completion_time, Some(at(160)));
        let c = complete(p);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Succeeded")
        );
        assert_eq!(c.last_transition_time, at(160));
        assert!(c.message.contains("src:ns.b-0123"));
        assert_eq!(done.requeue, None);
        assert_eq!(
            done.event.map(|e| (e.warning, e.reason)),
            Some((false, "BackupSucceeded".to_string()))
        );

        // Final: nothing changes any more.
        let after = decide(
            JobKind::Backup,
            p,
            Some(1),
            Observation::Failed {
                why: Failure::JobLost,
                message: "x".into(),
            },
            &at(200),
            0,
        );
        assert_eq!(&after.progress, p);
        assert_eq!((after.requeue, after.event), (None, None));
    }

    #[test]
    fn a_failure_carries_the_servers_message() {
        let d = decide(
            JobKind::Restore,
            &Progress::default(),
            Some(2),
            Observation::Failed {
                why: Failure::ServerFailed,
                message: "ISPN012042: Backup failed".into(),
            },
            &at(5),
            0,
        );
        let p = &d.progress;
        assert_eq!(p.phase, Some(Phase::Failed));
        assert_eq!(p.completion_time, Some(at(5)));
        let f = find_condition(&p.conditions, ConditionType::Failed).expect("Failed");
        assert_eq!(
            (f.status.as_str(), f.reason.as_str(), f.message.as_str()),
            ("True", "ServerFailed", "ISPN012042: Backup failed")
        );
        assert_eq!(f.observed_generation, Some(2));
        assert_eq!(complete(p).status, "False");
        assert_eq!(d.requeue, None);
        let e = d.event.expect("event");
        assert!(e.warning);
        assert_eq!(e.reason, "RestoreFailed");
        assert!(e.note.contains("ISPN012042"));
    }

    #[test]
    fn statuses_convert_both_ways() {
        let p = Progress {
            phase: Some(Phase::Running),
            archive: Some("a".into()),
            start_time: Some(at(1)),
            ..Progress::default()
        };
        let b: BackupStatus = p.clone().into();
        assert_eq!(Progress::from(b), p);
        let r: RestoreStatus = p.clone().into();
        assert_eq!(Progress::from(r), p);
        assert!(p.job_started());
        assert!(!p.is_final());
        assert!(!Progress::default().job_started());
    }
}
