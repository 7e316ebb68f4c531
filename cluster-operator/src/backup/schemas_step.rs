//! The schemas step of a Restore: its proto schemas restored by a job of their own before the
//! rest (`selection::restore_steps`), waited for within the reconcile that starts the Restore.
//! Pure: what the server said of the step's job becomes go on, poll again, or the
//! [`Observation`] that stops or parks the Restore (decided by [`super::phase::decide`]).

use std::time::Duration;

use infinispan_rest::JobStatus;

use super::phase::{Failure, Observation, Waiting};

/// How often the schemas step's job is polled.
pub const SCHEMAS_POLL: Duration = Duration::from_millis(500);

/// How long one reconcile waits for the schemas step's job ([`schemas_waited_too_long`]).
pub const SCHEMAS_WAIT: Duration = Duration::from_secs(60);

/// Where the schemas step of a Restore stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemasStep {
    /// Its job runs: look again after [`SCHEMAS_POLL`], until [`SCHEMAS_WAIT`].
    Running,
    /// Its job is done: start the restore job of the rest.
    Done,
    /// The Restore cannot go on (its status after this observation).
    Stop(Observation),
}

/// The schemas step after the server said `status` of its job `job` (`None`: it does not know
/// the job, after it was started).
pub fn schemas_step(job: &str, status: Option<JobStatus>) -> SchemasStep {
    match status {
        Some(JobStatus::Running) => SchemasStep::Running,
        Some(JobStatus::Done) => SchemasStep::Done,
        Some(JobStatus::Failed) => SchemasStep::Stop(Observation::Failed {
            why: Failure::ServerFailed,
            message: format!(
                "the schemas step failed: the server reports restore job {job} (the proto schemas, restored alone before the rest) failed (HTTP 500); nothing else was restored; Infinispan gives no reason over REST: the cause (ISPN005040 and what follows) is in the log of the target's pod 0"
            ),
        }),
        None => SchemasStep::Stop(Observation::Failed {
            why: Failure::JobLost,
            message: format!(
                "the schemas step failed: the server no longer knows restore job {job} (the proto schemas, restored alone before the rest): its node restarted while it ran, or it failed before it was registered; nothing else was restored"
            ),
        }),
    }
}

/// The schemas step's job `job` still runs after [`SCHEMAS_WAIT`]: the Restore waits (and is
/// tried again with backoff, finding the job again).
pub fn schemas_waited_too_long(job: &str) -> Observation {
    Observation::Waiting {
        why: Waiting::RestoringSchemas,
        message: format!(
            "the schemas step: restore job {job} (the proto schemas, restored alone before the rest) still runs after {} s; the rest is restored once it is done",
            SCHEMAS_WAIT.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::phase::{JobKind, Progress, decide, retry_delay};
    use common_crds::backup::Phase;
    use common_crds::conditions::{ConditionType, find_condition};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("valid"))
    }

    fn complete(p: &Progress) -> &Condition {
        find_condition(&p.conditions, ConditionType::Complete).expect("Complete")
    }

    #[test]
    fn the_schemas_step_goes_on_only_when_its_job_is_done() {
        let job = "ns.r-0123456789abcdef-schemas";
        assert_eq!(
            schemas_step(job, Some(JobStatus::Running)),
            SchemasStep::Running
        );
        assert_eq!(schemas_step(job, Some(JobStatus::Done)), SchemasStep::Done);
        for (status, why) in [
            (Some(JobStatus::Failed), Failure::ServerFailed),
            (None, Failure::JobLost),
        ] {
            let SchemasStep::Stop(observation) = schemas_step(job, status) else {
                panic!("{status:?} stops the Restore");
            };
            let d = decide(
                JobKind::Restore,
                &Progress::default(),
                Some(1),
                observation,
                &at(3),
                0,
            );
            assert_eq!(d.progress.phase, Some(Phase::Failed));
            let f = find_condition(&d.progress.conditions, ConditionType::Failed).expect("Failed");
            assert_eq!(f.reason, why.as_str());
            assert!(
                f.message.starts_with("the schemas step failed") && f.message.contains(job),
                "{}",
                f.message
            );
        }
        // Too long: Pending, retried with backoff; the same again writes nothing.
        let d = decide(
            JobKind::Restore,
            &Progress::default(),
            Some(1),
            schemas_waited_too_long(job),
            &at(3),
            2,
        );
        assert_eq!(d.progress.phase, Some(Phase::Pending));
        assert_eq!(complete(&d.progress).reason, "RestoringSchemas");
        assert_eq!(d.requeue, Some(retry_delay(2)));
        assert!(d.retrying);
        let again = decide(
            JobKind::Restore,
            &d.progress,
            Some(1),
            schemas_waited_too_long(job),
            &at(70),
            3,
        );
        assert_eq!(again.progress, d.progress);
        assert_eq!(again.event, None);
        assert!(SCHEMAS_POLL < SCHEMAS_WAIT);
    }
}
