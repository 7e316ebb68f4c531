//! Leader election: the replicas of one operator share a `Lease` (coordination.k8s.io/v1) whose
//! namespace and name the operator chooses ([`ElectionConfig`]; e.g. the resources operator of
//! cluster `demo` uses `demo-resources-operator`, design E7). One holds it and works; the
//! others are standbys: they read the Lease every retry period and write nothing.
//!
//! The protocol is client-go's, in small steps:
//! 1. observe the Lease (a read; the leader skips it while its own last write is current);
//! 2. decide (the pure [`decide`]): create it, acquire it, renew it, wait, or stop;
//! 3. write with optimistic concurrency: `create` fails when another candidate created it first,
//!    `replace` carries the resourceVersion that was observed, so of two candidates acting on
//!    the same observation exactly one wins; a 409 Conflict means someone else won this round.
//!
//! Time. Whether another holder's Lease has expired is judged on this process's monotonic
//! clock, from the moment it first saw the Lease's current version (a renewal changes the
//! version), never by comparing the Lease's `renewTime` with the local wall clock: node clocks
//! may disagree. The price: a fresh process facing a Lease left by a dead holder waits one full
//! lease duration. A Lease naming this process's own identity (a restarted container of the
//! same pod) and a released Lease (empty holder) are taken at once, so a single replica, or a
//! restart, starts without delay.
//!
//! Safety. The leader notes the instant *before* each renewal request; if no renewal succeeds
//! within the renew deadline (shorter than the lease duration) it stops. A candidate takes over
//! only a lease duration after it saw the last renewal, which is later than that instant, so
//! the old leader has stopped before the new one starts (give or take the drift between the two
//! monotonic clocks over one lease duration).
//!
//! Losing the Lease ends the process. [`Leadership::hold`] returns the [`Loss`]; the caller
//! drops its work at once (in-flight reconciles are futures and are dropped with it) and exits
//! with a non-zero status. A fresh process (in Kubernetes, the restarted container) then starts
//! again as a standby, with empty caches: simpler and safer than resetting state in place.
//!
//! On SIGTERM the leader stops its work first, then releases the Lease the client-go way
//! ([`Leadership::release`]: holder cleared, `leaseDurationSeconds: 1`) so that a standby takes
//! over within one retry period.
//!
//! Readiness: a standby is Ready once it has read the Lease and found another holder
//! ([`Candidate::acquire`] sets the [`Readiness`]); readiness never depends on leadership.
//!
//! Metrics ([`ElectionMetrics`], in the operator's own registry and with its prefix):
//! `<prefix>_leader` (1 while leading) and `<prefix>_lease_writes_total{operation}`.
//!
//! The timings' errors name the flags `--lease-duration`, `--lease-renew-deadline` and
//! `--lease-retry-period`: every operator of this workspace spells them so.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use crate::endpoint::Readiness;

/// Default `--lease-duration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default `--lease-renew-deadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default `--lease-retry-period`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The longest a release may take on shutdown (the pod's grace period must cover it).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Who competes for which Lease, and how fast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Namespace of the Lease (the operator's own, usually).
    pub namespace: String,
    /// Name of the Lease: one per group of replicas that must have one leader (never shared by
    /// two operators).
    pub lease_name: String,
    /// Holder identity written into the Lease: unique per replica, the same across restarts
    /// of one pod ([`default_identity`]).
    pub identity: String,
    pub timings: Timings,
}

/// The election's metrics. Registered in the operator's registry, so they carry its prefix.
#[derive(Clone, Debug)]
pub struct ElectionMetrics {
    /// `leader`: 1 while this process leads, else 0. The election sets it; an operator running
    /// without leader election sets it to 1 itself.
    pub leader: IntGauge,
    /// `lease_writes_total`: writes to the Lease by `operation` (`create`, `acquire`, `renew`,
    /// `release`).
    pub lease_writes: IntCounterVec,
}

impl ElectionMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let leader = IntGauge::new(
            "leader",
            "1 while this process leads (holds the Lease or runs without leader election)",
        )?;
        let lease_writes = IntCounterVec::new(
            Opts::new("lease_writes_total", "Writes to the leader-election Lease"),
            &["operation"],
        )?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(lease_writes.clone()))?;
        Ok(Self {
            leader,
            lease_writes,
        })
    }
}

/// The identity written as the Lease's holder when `--identity` is not given: `POD_NAME`, else
/// `<hostname>-<pid>`.
pub fn default_identity(pod_name: Option<String>) -> String {
    match pod_name.filter(|name| !name.is_empty()) {
        Some(name) => name,
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .or_else(|| std::env::var("HOSTNAME").ok())
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".to_string());
            format!("{host}-{}", std::process::id())
        }
    }
}

/// Timings of the election, checked: retry period < renew deadline < lease duration, and the
/// lease duration a whole number of seconds (it is written as `leaseDurationSeconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
}

/// Why timings are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingsError {
    #[error("--lease-duration must be a whole number of seconds, at least 1s (got {0:?})")]
    LeaseDuration(Duration),
    #[error("--lease-retry-period must be more than zero")]
    RetryPeriod,
    #[error(
        "--lease-renew-deadline ({renew_deadline:?}) must be shorter than --lease-duration \
         ({lease_duration:?}): a leader must give up before others may take over"
    )]
    RenewDeadline {
        renew_deadline: Duration,
        lease_duration: Duration,
    },
    #[error(
        "--lease-retry-period ({retry_period:?}) must be shorter than --lease-renew-deadline \
         ({renew_deadline:?}): a leader must get more than one try to renew"
    )]
    RetryNotBelowDeadline {
        retry_period: Duration,
        renew_deadline: Duration,
    },
}

impl Timings {
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, TimingsError> {
        let seconds = lease_duration.as_secs();
        if lease_duration.subsec_nanos() != 0 || seconds == 0 || seconds > i32::MAX as u64 {
            return Err(TimingsError::LeaseDuration(lease_duration));
        }
        if retry_period.is_zero() {
            return Err(TimingsError::RetryPeriod);
        }
        if renew_deadline >= lease_duration {
            return Err(TimingsError::RenewDeadline {
                renew_deadline,
                lease_duration,
            });
        }
        if retry_period >= renew_deadline {
            return Err(TimingsError::RetryNotBelowDeadline {
                retry_period,
                renew_deadline,
            });
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline
    }

    pub fn retry_period(&self) -> Duration {
        self.retry_period
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

/// What this process knows of the Lease at one round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// It could not be read this round.
    Unknown,
    /// There is no Lease.
    Absent,
    /// The Lease's current version, and when this process first saw that version.
    Present {
        /// `holderIdentity`; empty counts as none (a released Lease).
        holder: Option<String>,
        /// `leaseDurationSeconds`, when positive.
        lease_duration: Option<Duration>,
        since: Instant,
    },
}

impl Seen {
    /// `lease` as first seen at `since`.
    pub fn of(lease: &Lease, since: Instant) -> Self {
        let spec = lease.spec.as_ref();
        Self::Present {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            lease_duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
            since,
        }
    }
}

/// Where this process stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Candidate,
    /// Leading since its last successful renewal, whose request started at `renewed_at`.
    Leader {
        renewed_at: Instant,
    },
}

/// What to do this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// There is no Lease: create it, naming this process.
    Create,
    /// Take the Lease (free, released, expired, or naming this identity already): replace it at
    /// the observed version.
    Acquire,
    /// Leading and named by the Lease: replace it with a new `renewTime`.
    Renew,
    /// Try again after the retry period.
    Wait,
    /// Leading no more: stop at once.
    Lost(Loss),
}

/// Why a leader stops.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Loss {
    #[error("no renewal succeeded within the renew deadline (last one {since_renewal:?} ago)")]
    RenewDeadline { since_renewal: Duration },
    #[error("the Lease is held by {0:?} now")]
    TakenBy(String),
    #[error("the Lease was released by someone else")]
    Released,
    #[error("the Lease was deleted")]
    Deleted,
}

/// The election step: given where this process stands, what it sees of the Lease, its
/// identity, the timings and the current instant, what it must do. No I/O.
///
/// A leader carries on only while the Lease names it and it renewed within the renew deadline.
/// A candidate takes a Lease that is absent, released, its own, or unchanged for longer than
/// the Lease's duration (its `leaseDurationSeconds`, else ours).
pub fn decide(role: Role, seen: &Seen, me: &str, timings: &Timings, now: Instant) -> Step {
    match role {
        Role::Leader { renewed_at } => {
            let since_renewal = now.saturating_duration_since(renewed_at);
            if since_renewal >= timings.renew_deadline {
                return Step::Lost(Loss::RenewDeadline { since_renewal });
            }
            match seen {
                Seen::Unknown => Step::Wait,
                Seen::Absent => Step::Lost(Loss::Deleted),
                Seen::Present { holder: None, .. } => Step::Lost(Loss::Released),
                Seen::Present {
                    holder: Some(holder),
                    ..
                } if holder == me => Step::Renew,
                Seen::Present {
                    holder: Some(holder),
                    ..
                } => Step::Lost(Loss::TakenBy(holder.clone())),
            }
        }
        Role::Candidate => match seen {
            Seen::Unknown => Step::Wait,
            Seen::Absent => Step::Create,
            Seen::Present { holder: None, .. } => Step::Acquire,
            Seen::Present {
                holder: Some(holder),
                ..
            } if holder == me => Step::Acquire,
            Seen::Present {
                holder: Some(_),
                lease_duration,
                since,
            } => {
                let duration = lease_duration.unwrap_or(timings.lease_duration);
                if now.saturating_duration_since(*since) >= duration {
                    Step::Acquire
                } else {
                    Step::Wait
                }
            }
        },
    }
}

/// The Lease's spec once `me` has created, acquired or renewed it at `now`: the acquire time
/// and transitions carry over while the holder stays the same.
pub fn claimed(
    previous: Option<&LeaseSpec>,
    me: &str,
    timings: &Timings,
    now: Timestamp,
) -> LeaseSpec {
    let previous = previous.cloned().unwrap_or_default();
    let same_holder = previous.holder_identity.as_deref() == Some(me);
    let existed = previous.holder_identity.is_some() || previous.renew_time.is_some();
    let transitions = previous.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(timings.lease_duration_seconds()),
        acquire_time: match previous.acquire_time {
            Some(time) if same_holder => Some(time),
            _ => Some(MicroTime(now)),
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if same_holder || !existed {
            transitions
        } else {
            transitions.saturating_add(1)
        }),
        ..previous
    }
}

/// The Lease's spec once released at `now` (client-go's convention: no holder, a one-second
/// duration, so that a candidate takes it at its next look).
pub fn released(previous: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
    let previous = previous.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..previous
    }
}

/// The parts of the election that talk to the API server.
struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    metrics: ElectionMetrics,
    /// The Lease as last read or written, and when its version was first seen.
    last: Option<(Lease, Instant)>,
}

/// What a write came to.
enum Wrote {
    Done,
    /// Another writer was first (409): observe again.
    Lost,
    /// Anything else (logged); retried after the retry period.
    Failed,
}

impl Elector {
    /// Reads the Lease and returns what is seen of it.
    async fn observe(&mut self) -> Seen {
        match self.api.get_opt(&self.name).await {
            Ok(Some(lease)) => self.remember(lease),
            Ok(None) => {
                self.last = None;
                Seen::Absent
            }
            Err(error) => {
                tracing::warn!(lease = self.name, %error, "cannot read the Lease");
                Seen::Unknown
            }
        }
    }

    /// Keeps `lease`; a new version counts from now.
    fn remember(&mut self, lease: Lease) -> Seen {
        let now = Instant::now();
        let since = match &self.last {
            Some((last, since))
                if last.metadata.resource_version == lease.metadata.resource_version =>
            {
                *since
            }
            _ => now,
        };
        let seen = Seen::of(&lease, since);
        self.last = Some((lease, since));
        seen
    }

    fn count(&self, operation: &str) {
        self.metrics
            .lease_writes
            .with_label_values(&[operation])
            .inc();
    }

    /// Creates the Lease naming this process.
    async fn create(&mut self) -> Wrote {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(claimed(
                None,
                &self.identity,
                &self.timings,
                Timestamp::now(),
            )),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.count("create");
                self.remember(created);
                Wrote::Done
            }
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                tracing::debug!(
                    lease = self.name,
                    "another candidate created the Lease first"
                );
                Wrote::Lost
            }
            Err(error) => {
                tracing::warn!(lease = self.name, %error, "cannot create the Lease");
                Wrote::Failed
            }
        }
    }

    /// Replaces the Lease last seen (at its resourceVersion) with `spec`.
    async fn replace(
        &mut self,
        operation: &str,
        spec: impl FnOnce(Option<&LeaseSpec>) -> LeaseSpec,
    ) -> Wrote {
        let Some((last, _)) = &self.last else {
            return Wrote::Lost;
        };
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version: last.metadata.resource_version.clone(),
                // Unchanged when left out.
                managed_fields: None,
                ..last.metadata.clone()
            },
            spec: Some(spec(last.spec.as_ref())),
        };
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(replaced) => {
                self.count(operation);
                self.remember(replaced);
                Wrote::Done
            }
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {
                tracing::debug!(lease = self.name, operation, "the Lease changed meanwhile");
                self.last = None;
                Wrote::Lost
            }
            Err(error) => {
                tracing::warn!(lease = self.name, operation, %error, "cannot write the Lease");
                self.last = None;
                Wrote::Failed
            }
        }
    }
}

/// A replica that does not lead (yet).
pub struct Candidate {
    elector: Elector,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate")
            .field("lease", &self.elector.name)
            .field("identity", &self.elector.identity)
            .field("timings", &self.elector.timings)
            .finish_non_exhaustive()
    }
}

impl Candidate {
    /// A candidate for `config`'s Lease; nothing is read yet. Sets `leader` to 0.
    pub fn new(client: kube::Client, config: ElectionConfig, metrics: ElectionMetrics) -> Self {
        let ElectionConfig {
            namespace,
            lease_name,
            identity,
            timings,
        } = config;
        metrics.leader.set(0);
        Self {
            elector: Elector {
                api: Api::namespaced(client, &namespace),
                name: lease_name,
                identity,
                timings,
                metrics,
                last: None,
            },
        }
    }

    /// Observes the Lease every retry period until this process holds it. After the first
    /// round that leaves it a standby (the Lease was read, someone else holds it), `readiness`
    /// is set as a whole ([`Readiness::set_ready`]): a standby is Ready.
    pub async fn acquire(self, readiness: &Readiness) -> Leadership {
        let Self { mut elector } = self;
        let mut standby_said = false;
        loop {
            let seen = elector.observe().await;
            let step = decide(
                Role::Candidate,
                &seen,
                &elector.identity,
                &elector.timings,
                Instant::now(),
            );
            let started = Instant::now();
            let wrote = match step {
                Step::Create => Some(elector.create().await),
                Step::Acquire | Step::Renew => {
                    let (identity, timings) = (elector.identity.clone(), elector.timings);
                    Some(
                        elector
                            .replace("acquire", |previous| {
                                claimed(previous, &identity, &timings, Timestamp::now())
                            })
                            .await,
                    )
                }
                Step::Wait | Step::Lost(_) => None,
            };
            if let Some(Wrote::Done) = wrote {
                let previous = match &seen {
                    Seen::Present {
                        holder: Some(holder),
                        ..
                    } => holder.as_str(),
                    _ => "nobody",
                };
                tracing::info!(
                    lease = elector.name,
                    identity = elector.identity,
                    previous,
                    "became the leader"
                );
                elector.metrics.leader.set(1);
                return Leadership {
                    elector,
                    renewed_at: started,
                };
            }
            if !standby_said && let Seen::Present { holder, .. } = &seen {
                standby_said = true;
                tracing::info!(
                    lease = elector.name,
                    identity = elector.identity,
                    holder = holder.as_deref().unwrap_or(""),
                    "standby: another replica holds the Lease"
                );
                readiness.set_ready();
            }
            tokio::time::sleep(elector.timings.retry_period).await;
        }
    }
}

/// This process holds the Lease.
pub struct Leadership {
    elector: Elector,
    /// When the request of the last successful renewal (or the acquisition) started.
    renewed_at: Instant,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("lease", &self.elector.name)
            .field("identity", &self.elector.identity)
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// Renews the Lease every retry period; returns only when leadership is lost (the caller
    /// must stop all work at once).
    pub async fn hold(&mut self) -> Loss {
        let timings = self.elector.timings;
        let mut last_attempt = Instant::now();
        // After a 409 the Lease is read and decided on at once, once.
        let mut look_now = false;
        loop {
            if !look_now {
                let deadline = self.renewed_at + timings.renew_deadline;
                let next = (last_attempt + timings.retry_period).min(deadline);
                tokio::time::sleep_until(next.into()).await;
            }
            let conflict_before = std::mem::take(&mut look_now);
            // The leader's own last write is what it sees, unless it must read.
            // A read is bounded by the renew deadline like a renewal: a hanging read must not
            // keep a leader from noticing its loss.
            let seen = match &self.elector.last {
                Some((lease, since)) => Seen::of(lease, *since),
                None => {
                    let left = (self.renewed_at + timings.renew_deadline)
                        .saturating_duration_since(Instant::now());
                    match tokio::time::timeout(left, self.elector.observe()).await {
                        Ok(seen) => seen,
                        Err(_) => {
                            tracing::warn!(
                                lease = self.elector.name,
                                "reading the Lease timed out"
                            );
                            Seen::Unknown
                        }
                    }
                }
            };
            let now = Instant::now();
            let role = Role::Leader {
                renewed_at: self.renewed_at,
            };
            match decide(role, &seen, &self.elector.identity, &timings, now) {
                Step::Lost(loss) => return self.lose(loss),
                // The next look one retry period later: a failed read (the API server down)
                // was retried at once, thousands of reads a second until the renew deadline.
                Step::Wait => last_attempt = now,
                Step::Create | Step::Acquire | Step::Renew => {
                    last_attempt = now;
                    let left =
                        (self.renewed_at + timings.renew_deadline).saturating_duration_since(now);
                    let identity = self.elector.identity.clone();
                    let renew = self.elector.replace("renew", |previous| {
                        claimed(previous, &identity, &timings, Timestamp::now())
                    });
                    match tokio::time::timeout(left, renew).await {
                        Ok(Wrote::Done) => self.renewed_at = now,
                        Ok(Wrote::Lost) => look_now = !conflict_before,
                        Ok(Wrote::Failed) => {}
                        Err(_) => {
                            self.elector.last = None;
                            tracing::warn!(
                                lease = self.elector.name,
                                "renewing the Lease timed out"
                            );
                        }
                    }
                }
            }
        }
    }

    fn lose(&mut self, loss: Loss) -> Loss {
        self.elector.metrics.leader.set(0);
        tracing::error!(
            lease = self.elector.name,
            identity = self.elector.identity,
            %loss,
            "lost the leadership: stopping all work at once"
        );
        loss
    }

    /// Releases the Lease (shutdown): a standby takes it at its next look.
    pub async fn release(mut self) {
        self.elector.metrics.leader.set(0);
        let elector = &mut self.elector;
        let release = async {
            if elector.last.is_none() {
                elector.observe().await;
            }
            let holder = elector
                .last
                .as_ref()
                .and_then(|(lease, _)| lease.spec.as_ref()?.holder_identity.clone());
            if holder.as_deref() != Some(elector.identity.as_str()) {
                tracing::warn!(
                    lease = elector.name,
                    ?holder,
                    "not releasing the Lease: it does not name this process"
                );
                return;
            }
            match elector
                .replace("release", |previous| released(previous, Timestamp::now()))
                .await
            {
                Wrote::Done => tracing::info!(
                    lease = elector.name,
                    identity = elector.identity,
                    "released the Lease"
                ),
                Wrote::Lost | Wrote::Failed => tracing::warn!(
                    lease = elector.name,
                    "could not release the Lease; a standby takes over when it expires"
                ),
            }
        };
        if tokio::time::timeout(RELEASE_TIMEOUT, release)
            .await
            .is_err()
        {
            tracing::warn!(
                lease = self.elector.name,
                "releasing the Lease timed out; a standby takes over when it expires"
            );
        }
    }
}

#[cfg(test)]
mod tests;
