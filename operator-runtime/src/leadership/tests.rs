//! Tests of the leader election: the pure decisions and the Lease writes.

use super::*;

const ME: &str = "pod-a";
const OTHER: &str = "pod-b";

fn timings() -> Timings {
    Timings::default()
}

fn held(holder: &str, lease_duration: Option<u64>, since: Instant) -> Seen {
    Seen::Present {
        holder: Some(holder.to_string()),
        lease_duration: lease_duration.map(Duration::from_secs),
        since,
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

// Candidate.

#[test]
fn a_missing_lease_is_created() {
    let now = Instant::now();
    let step = decide(Role::Candidate, &Seen::Absent, ME, &timings(), now);
    assert_eq!(step, Step::Create);
}

#[test]
fn a_released_lease_is_acquired_at_once() {
    let now = Instant::now();
    let seen = Seen::Present {
        holder: None,
        lease_duration: Some(secs(1)),
        since: now,
    };
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &timings(), now),
        Step::Acquire
    );
}

#[test]
fn an_empty_holder_counts_as_released() {
    let now = Instant::now();
    let lease = Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    };
    let seen = Seen::of(&lease, now);
    assert_eq!(
        seen,
        Seen::Present {
            holder: None,
            lease_duration: Some(secs(15)),
            since: now
        }
    );
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &timings(), now),
        Step::Acquire
    );
}

#[test]
fn a_lease_naming_me_is_taken_at_once_by_a_fresh_process() {
    let now = Instant::now();
    let seen = held(ME, Some(15), now);
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &timings(), now),
        Step::Acquire
    );
}

#[test]
fn a_lease_held_by_another_is_waited_for_until_it_expires() {
    let since = Instant::now();
    let seen = held(OTHER, Some(15), since);
    let t = timings();
    assert_eq!(decide(Role::Candidate, &seen, ME, &t, since), Step::Wait);
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &t, since + secs(14)),
        Step::Wait
    );
    let just_before = since + secs(15) - Duration::from_nanos(1);
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &t, just_before),
        Step::Wait
    );
    // Expired exactly at the lease duration, and after.
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &t, since + secs(15)),
        Step::Acquire
    );
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &t, since + secs(3600)),
        Step::Acquire
    );
}

#[test]
fn expiry_follows_the_holders_lease_duration() {
    let since = Instant::now();
    let t = timings();
    // The holder promised 30 s: our 15 s do not count.
    let long = held(OTHER, Some(30), since);
    assert_eq!(
        decide(Role::Candidate, &long, ME, &t, since + secs(20)),
        Step::Wait
    );
    assert_eq!(
        decide(Role::Candidate, &long, ME, &t, since + secs(30)),
        Step::Acquire
    );
    // The holder promised 5 s.
    let short = held(OTHER, Some(5), since);
    assert_eq!(
        decide(Role::Candidate, &short, ME, &t, since + secs(5)),
        Step::Acquire
    );
}

#[test]
fn a_missing_or_invalid_lease_duration_falls_back_to_ours() {
    let since = Instant::now();
    let t = timings();
    for seconds in [None, Some(0), Some(-5)] {
        let lease = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(OTHER.to_string()),
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let seen = Seen::of(&lease, since);
        assert_eq!(
            decide(Role::Candidate, &seen, ME, &t, since + secs(14)),
            Step::Wait,
            "{seconds:?}"
        );
        assert_eq!(
            decide(Role::Candidate, &seen, ME, &t, since + secs(15)),
            Step::Acquire,
            "{seconds:?}"
        );
    }
}

#[test]
fn a_lease_without_spec_is_free() {
    let now = Instant::now();
    let seen = Seen::of(&Lease::default(), now);
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &timings(), now),
        Step::Acquire
    );
}

#[test]
fn an_observation_from_the_future_never_expires_early() {
    // Instants are monotonic; should `since` still be later than `now`, nothing has elapsed.
    let now = Instant::now();
    let seen = held(OTHER, Some(1), now + secs(10));
    assert_eq!(
        decide(Role::Candidate, &seen, ME, &timings(), now),
        Step::Wait
    );
}

#[test]
fn an_unreadable_lease_means_wait() {
    let now = Instant::now();
    assert_eq!(
        decide(Role::Candidate, &Seen::Unknown, ME, &timings(), now),
        Step::Wait
    );
}

// Leader.

#[test]
fn a_leader_named_by_the_lease_renews() {
    let renewed_at = Instant::now();
    let seen = held(ME, Some(15), renewed_at);
    let role = Role::Leader { renewed_at };
    let t = timings();
    assert_eq!(
        decide(role, &seen, ME, &t, renewed_at + secs(2)),
        Step::Renew
    );
    // Even long after the lease duration by the record: its own renew deadline governs.
    let just_before = renewed_at + secs(10) - Duration::from_nanos(1);
    assert_eq!(decide(role, &seen, ME, &t, just_before), Step::Renew);
}

#[test]
fn a_leader_past_its_renew_deadline_has_lost() {
    let renewed_at = Instant::now();
    let seen = held(ME, Some(15), renewed_at);
    let role = Role::Leader { renewed_at };
    let t = timings();
    assert_eq!(
        decide(role, &seen, ME, &t, renewed_at + secs(10)),
        Step::Lost(Loss::RenewDeadline {
            since_renewal: secs(10)
        })
    );
    // Whatever it sees, unreadable included.
    assert!(matches!(
        decide(role, &Seen::Unknown, ME, &t, renewed_at + secs(11)),
        Step::Lost(Loss::RenewDeadline { .. })
    ));
}

#[test]
fn a_leader_that_cannot_read_retries_within_its_deadline() {
    let renewed_at = Instant::now();
    let role = Role::Leader { renewed_at };
    assert_eq!(
        decide(role, &Seen::Unknown, ME, &timings(), renewed_at + secs(9)),
        Step::Wait
    );
}

#[test]
fn a_leader_renewed_in_the_future_keeps_leading() {
    let now = Instant::now();
    let role = Role::Leader {
        renewed_at: now + secs(60),
    };
    let seen = held(ME, Some(15), now);
    assert_eq!(decide(role, &seen, ME, &timings(), now), Step::Renew);
}

#[test]
fn a_leader_sees_another_holder_and_stops() {
    let now = Instant::now();
    let role = Role::Leader { renewed_at: now };
    let seen = held(OTHER, Some(15), now);
    assert_eq!(
        decide(role, &seen, ME, &timings(), now),
        Step::Lost(Loss::TakenBy(OTHER.to_string()))
    );
}

#[test]
fn a_leader_whose_lease_was_released_or_deleted_stops() {
    let now = Instant::now();
    let role = Role::Leader { renewed_at: now };
    let released = Seen::Present {
        holder: None,
        lease_duration: Some(secs(1)),
        since: now,
    };
    assert_eq!(
        decide(role, &released, ME, &timings(), now),
        Step::Lost(Loss::Released)
    );
    assert_eq!(
        decide(role, &Seen::Absent, ME, &timings(), now),
        Step::Lost(Loss::Deleted)
    );
}

// Lease specs.

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[test]
fn a_new_lease_names_me_with_no_transition() {
    let spec = claimed(None, ME, &timings(), at(100));
    assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(spec.renew_time, Some(MicroTime(at(100))));
    assert_eq!(spec.lease_transitions, Some(0));
}

#[test]
fn a_renewal_keeps_acquire_time_and_transitions() {
    let first = claimed(None, ME, &timings(), at(100));
    let renewed = claimed(Some(&first), ME, &timings(), at(102));
    assert_eq!(renewed.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(renewed.renew_time, Some(MicroTime(at(102))));
    assert_eq!(renewed.lease_transitions, Some(0));
}

#[test]
fn a_takeover_counts_a_transition() {
    let theirs = claimed(None, OTHER, &timings(), at(100));
    let mine = claimed(Some(&theirs), ME, &timings(), at(130));
    assert_eq!(mine.holder_identity.as_deref(), Some(ME));
    assert_eq!(mine.acquire_time, Some(MicroTime(at(130))));
    assert_eq!(mine.lease_transitions, Some(1));
    let back = released(Some(&mine), at(140));
    let again = claimed(Some(&back), OTHER, &timings(), at(141));
    assert_eq!(again.lease_transitions, Some(2));
}

#[test]
fn a_released_lease_has_no_holder_and_one_second() {
    let mine = claimed(None, ME, &timings(), at(100));
    let spec = released(Some(&mine), at(110));
    assert_eq!(spec.holder_identity, None);
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.renew_time, Some(MicroTime(at(110))));
    assert_eq!(spec.lease_transitions, Some(0));
}

// Timings.

#[test]
fn default_timings_are_the_designs() -> Result<(), TimingsError> {
    let t = Timings::new(secs(15), secs(10), secs(2))?;
    assert_eq!(t, Timings::default());
    Ok(())
}

#[test]
fn timings_are_checked() {
    let ms = Duration::from_millis;
    assert_eq!(
        Timings::new(secs(10), secs(10), secs(2)),
        Err(TimingsError::RenewDeadline {
            renew_deadline: secs(10),
            lease_duration: secs(10)
        })
    );
    assert_eq!(
        Timings::new(secs(15), secs(10), secs(10)),
        Err(TimingsError::RetryNotBelowDeadline {
            retry_period: secs(10),
            renew_deadline: secs(10)
        })
    );
    assert_eq!(
        Timings::new(ms(1500), ms(1000), ms(200)),
        Err(TimingsError::LeaseDuration(ms(1500)))
    );
    assert_eq!(
        Timings::new(Duration::ZERO, Duration::ZERO, Duration::ZERO),
        Err(TimingsError::LeaseDuration(Duration::ZERO))
    );
    assert_eq!(
        Timings::new(secs(15), secs(10), Duration::ZERO),
        Err(TimingsError::RetryPeriod)
    );
    assert!(Timings::new(secs(2), ms(1500), ms(100)).is_ok());
    assert!(Timings::new(secs(1 << 40), secs(10), secs(2)).is_err());
}

#[test]
fn identity_defaults_to_the_pod_name() {
    assert_eq!(default_identity(Some("op-7d9f-x".to_string())), "op-7d9f-x");
    let fallback = default_identity(Some(String::new()));
    assert!(
        fallback.ends_with(&format!("-{}", std::process::id())),
        "{fallback}"
    );
}

#[test]
fn the_metrics_take_the_registrys_prefix() -> Result<(), prometheus::Error> {
    let registry = Registry::new_custom(Some("some_operator".to_string()), None)?;
    let metrics = ElectionMetrics::register(&registry)?;
    metrics.leader.set(1);
    metrics.lease_writes.with_label_values(&["renew"]).inc();
    let text = crate::endpoint::render(&registry);
    assert!(text.contains("some_operator_leader 1"), "{text}");
    assert!(
        text.contains("some_operator_lease_writes_total{operation=\"renew\"} 1"),
        "{text}"
    );
    // A second operator in the same process would have a registry of its own; one registry
    // takes the election's metrics once.
    assert!(ElectionMetrics::register(&registry).is_err());
    Ok(())
}
