//! The leader-election flags of an operator's `run` command, declared once.
//!
//! clap's environment variable names must be literals and each operator has its own prefix, so
//! [`election_args!`](crate::election_args!) stamps a clap `Args` struct for one operator: the
//! flags, their types, parsers and defaults, and `CLUSTER_OPERATOR_LEASE_DURATION`-style
//! variables built with `concat!` from the prefix; the operator gives the help texts. The
//! struct's `election()` checks the timings and resolves the holder identity into an
//! [`Election`] ([`resolve`]).

use std::time::Duration;

use crate::leadership::{self, Timings, TimingsError};

/// Leader election as configured: who this process is, and the checked timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    pub identity: String,
    pub timings: Timings,
}

/// `None` when leader election is off; the timings checked either way (turning it on later
/// cannot fail). The identity: `identity` unless empty, else POD_NAME, else
/// `<hostname>-<pid>`.
pub fn resolve(
    enabled: bool,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    identity: Option<&str>,
) -> Result<Option<Election>, TimingsError> {
    let timings = Timings::new(lease_duration, renew_deadline, retry_period)?;
    if !enabled {
        return Ok(None);
    }
    let identity = match identity.filter(|i| !i.is_empty()) {
        Some(identity) => identity.to_string(),
        None => leadership::default_identity(std::env::var("POD_NAME").ok()),
    };
    Ok(Some(Election { identity, timings }))
}

/// Declares an operator's leader-election flags: a clap `Args` struct under the help heading
/// "Leader election" with `--leader-election[=BOOL]` (default true), `--lease-duration` (15s),
/// `--lease-renew-deadline` (10s), `--lease-retry-period` (2s), `--identity` and, when named,
/// `--lease-namespace`; each also the environment variable `<prefix><FLAG>`. Each flag is
/// written with its doc comment (the help text), in this order:
///
/// ```
/// operator_runtime::election_args! {
///     /// Leader-election options of `run`.
///     pub struct ElectionArgs {
///         env_prefix: "MY_OPERATOR_",
///         /// Elect one leader among the replicas through a Lease.
///         enabled,
///         /// Namespace of the Lease (optional flag: leave it out).
///         lease_namespace,
///         /// How long a Lease holds without renewal.
///         lease_duration,
///         /// How long the leader tries to renew.
///         lease_renew_deadline,
///         /// How often the leader renews.
///         lease_retry_period,
///         /// Holder identity written in the Lease.
///         identity,
///     }
/// }
/// # use clap::Parser;
/// # #[derive(Parser)]
/// # struct Cli { #[command(flatten)] election: ElectionArgs }
/// let cli = Cli::try_parse_from(["my-operator", "--lease-duration=20s"]).unwrap();
/// assert!(cli.election.election().unwrap().is_some());
/// ```
#[macro_export]
macro_rules! election_args {
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident {
            env_prefix: $prefix:literal,
            $(#[doc = $enabled:literal])* enabled,
            $(#[doc = $namespace:literal])* lease_namespace,
            $(#[doc = $duration:literal])* lease_duration,
            $(#[doc = $renew:literal])* lease_renew_deadline,
            $(#[doc = $retry:literal])* lease_retry_period,
            $(#[doc = $identity:literal])* identity $(,)?
        }
    ) => {
        $crate::election_args! {
            @struct [$(#[doc = $doc])*] $vis $name, $prefix,
            [$(#[doc = $enabled])*],
            {
                $(#[doc = $namespace])*
                #[arg(long, env = concat!($prefix, "LEASE_NAMESPACE"))]
                pub lease_namespace: Option<String>,
            },
            [$(#[doc = $duration])*], [$(#[doc = $renew])*], [$(#[doc = $retry])*],
            [$(#[doc = $identity])*]
        }
    };
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident {
            env_prefix: $prefix:literal,
            $(#[doc = $enabled:literal])* enabled,
            $(#[doc = $duration:literal])* lease_duration,
            $(#[doc = $renew:literal])* lease_renew_deadline,
            $(#[doc = $retry:literal])* lease_retry_period,
            $(#[doc = $identity:literal])* identity $(,)?
        }
    ) => {
        $crate::election_args! {
            @struct [$(#[doc = $doc])*] $vis $name, $prefix,
            [$(#[doc = $enabled])*], {},
            [$(#[doc = $duration])*], [$(#[doc = $renew])*], [$(#[doc = $retry])*],
            [$(#[doc = $identity])*]
        }
    };
    (
        @struct [$($doc:tt)*] $vis:vis $name:ident, $prefix:literal,
        [$($enabled:tt)*], { $($namespace:tt)* },
        [$($duration:tt)*], [$($renew:tt)*], [$($retry:tt)*], [$($identity:tt)*]
    ) => {
        $($doc)*
        #[derive(Debug, Clone, ::clap::Args)]
        #[command(next_help_heading = "Leader election")]
        $vis struct $name {
            $($enabled)*
            #[arg(
                long = "leader-election",
                env = concat!($prefix, "LEADER_ELECTION"),
                value_name = "BOOL",
                value_parser = ::clap::builder::BoolishValueParser::new(),
                num_args = 0..=1,
                require_equals = true,
                default_value = "true",
                default_missing_value = "true"
            )]
            pub enabled: bool,

            $($namespace)*

            $($duration)*
            #[arg(
                long,
                env = concat!($prefix, "LEASE_DURATION"),
                value_parser = $crate::duration::parse_duration,
                default_value = "15s"
            )]
            pub lease_duration: ::std::time::Duration,

            $($renew)*
            #[arg(
                long,
                env = concat!($prefix, "LEASE_RENEW_DEADLINE"),
                value_parser = $crate::duration::parse_duration,
                default_value = "10s"
            )]
            pub lease_renew_deadline: ::std::time::Duration,

            $($retry)*
            #[arg(
                long,
                env = concat!($prefix, "LEASE_RETRY_PERIOD"),
                value_parser = $crate::duration::parse_duration,
                default_value = "2s"
            )]
            pub lease_retry_period: ::std::time::Duration,

            $($identity)*
            #[arg(long, env = concat!($prefix, "IDENTITY"))]
            pub identity: Option<String>,
        }

        impl $name {
            /// `None` when leader election is off; the timings checked either way
            /// ([`resolve`]($crate::election_args::resolve)).
            pub fn election(
                &self,
            ) -> ::std::result::Result<
                ::std::option::Option<$crate::election_args::Election>,
                $crate::leadership::TimingsError,
            > {
                $crate::election_args::resolve(
                    self.enabled,
                    self.lease_duration,
                    self.lease_renew_deadline,
                    self.lease_retry_period,
                    self.identity.as_deref(),
                )
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    crate::election_args! {
        /// Test flags without a Lease namespace.
        pub struct Plain {
            env_prefix: "TEST_OPERATOR_",
            /// Elect.
            enabled,
            /// Duration.
            lease_duration,
            /// Deadline.
            lease_renew_deadline,
            /// Period.
            lease_retry_period,
            /// Who.
            identity,
        }
    }

    crate::election_args! {
        pub struct WithNamespace {
            env_prefix: "OTHER_",
            enabled,
            /// Where.
            lease_namespace,
            lease_duration,
            lease_renew_deadline,
            lease_retry_period,
            identity
        }
    }

    #[derive(Debug, Parser)]
    struct PlainCli {
        #[command(flatten)]
        election: Plain,
    }

    #[derive(Debug, Parser)]
    struct NamespaceCli {
        #[command(flatten)]
        election: WithNamespace,
    }

    #[test]
    fn the_flags_carry_the_prefix_and_the_defaults() {
        PlainCli::command().debug_assert();
        NamespaceCli::command().debug_assert();
        let help = PlainCli::command().render_long_help().to_string();
        for var in [
            "TEST_OPERATOR_LEADER_ELECTION",
            "TEST_OPERATOR_LEASE_DURATION",
            "TEST_OPERATOR_LEASE_RENEW_DEADLINE",
            "TEST_OPERATOR_LEASE_RETRY_PERIOD",
            "TEST_OPERATOR_IDENTITY",
        ] {
            assert!(help.contains(&format!("[env: {var}=")), "{var}: {help}");
        }
        assert!(!help.contains("lease-namespace"), "{help}");
        assert!(help.contains("Leader election:"), "{help}");
        let help = NamespaceCli::command().render_long_help().to_string();
        assert!(help.contains("[env: OTHER_LEASE_NAMESPACE="), "{help}");

        let cli = NamespaceCli::try_parse_from(["x", "--lease-namespace=ns", "--identity=me"])
            .expect("parses");
        assert_eq!(cli.election.lease_namespace.as_deref(), Some("ns"));
        let election = cli.election.election().expect("timings").expect("on");
        assert_eq!(election.identity, "me");
        assert_eq!(
            election.timings,
            Timings::new(
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
            .expect("the defaults")
        );
    }

    #[test]
    fn off_still_checks_the_timings() {
        let off = PlainCli::try_parse_from(["x", "--leader-election=false"]).expect("parses");
        assert_eq!(off.election.election().expect("timings"), None);
        let bad =
            PlainCli::try_parse_from(["x", "--leader-election=no", "--lease-retry-period=20s"])
                .expect("parses");
        assert!(bad.election.election().is_err());
    }
}
