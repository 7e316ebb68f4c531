//! Step 3 of a reconcile: validate the CR with what it references and build the objects it asks
//! for (pure). A problem of the input is a typed [`Problem`] (its [`ProblemReason`] is
//! the `Degraded` reason), never an error: nothing the API server does can fix it.

use common_crds::Infinispan;
use common_crds::conditions::ProblemReason;
use kube::ResourceExt;

use super::referenced::Read;
use super::status::Problem;
use crate::build::{expose, resources_operator, server, user_metadata};
use crate::cr_policy::{self, CrPolicy};

/// The server's objects, ready to apply.
#[derive(Debug)]
pub struct Server {
    pub objects: server::Objects,
    /// The `spec.expose` Service or Ingress (none: a left-over one is deleted).
    pub exposed: expose::Exposed,
    /// The server version the image runs.
    pub version: String,
    /// The API server serves ServiceMonitors: the one of `objects.monitoring` is applied (or a
    /// left-over one deleted); otherwise nothing is done about it.
    pub service_monitors_served: bool,
    /// The API server serves OpenShift Routes: the Route of `exposed` is applied (or a
    /// left-over one deleted); otherwise nothing is done about Routes.
    pub routes_served: bool,
}

/// Everything a live CR asks for, built from the CR, the operator's settings and what the CR
/// references.
#[derive(Debug)]
pub struct Desired {
    /// The server's objects, or why they cannot be built.
    pub server: Result<Server, Problem>,
    /// The resources operator's objects, or why they cannot be built; `None` when
    /// `spec.resourcesOperator.enabled` is false.
    pub resources_operator: Option<Result<resources_operator::Built, Problem>>,
    /// The name of the operators' credentials Secret.
    pub operator_credentials_secret: String,
}

/// Checks the CR and builds its objects: first the image (`spec.version`), then the server's
/// objects, then the resources operator's.
pub fn build(
    cluster: &Infinispan,
    server_settings: &server::Settings,
    resources_operator_settings: &resources_operator::Settings,
    read: &Read,
) -> Desired {
    Desired {
        server: build_server(cluster, server_settings, read),
        resources_operator: cluster
            .spec
            .resources_operator
            .enabled
            .then(|| build_resources_operator(cluster, resources_operator_settings, read)),
        operator_credentials_secret: read.operator_credentials.name_any(),
    }
}

/// The operator's policy on what a CR may ask for ([`cr_policy`]): the problem of a CR that
/// asks for more (nothing of it is applied, not even its credentials), checked before anything
/// else. The operator's own images (its version map, its resources-operator image) are always
/// allowed.
pub fn refusal(
    cluster: &Infinispan,
    server_settings: &server::Settings,
    resources_operator_settings: &resources_operator::Settings,
    policy: &CrPolicy,
) -> Option<Problem> {
    let own_images: Vec<&str> = server_settings
        .images
        .by_version
        .values()
        .map(String::as_str)
        .chain([resources_operator_settings.image.as_str()])
        .collect();
    let violations = cr_policy::check(cluster, policy, &own_images);
    (!violations.is_empty()).then(|| {
        Problem::new(
            ProblemReason::PolicyRefused,
            cr_policy::message(&violations),
        )
    })
}

fn build_server(
    cluster: &Infinispan,
    settings: &server::Settings,
    read: &Read,
) -> Result<Server, Problem> {
    let invalid = |error: server::BuildError| Problem::new(error.reason(), error);
    let image = settings.images.resolve(cluster).map_err(invalid)?;
    let objects = server::build(cluster, settings, &read.referenced).map_err(invalid)?;
    let added = user_metadata::of(cluster).map_err(|reserved| invalid(reserved.into()))?;
    Ok(Server {
        objects,
        exposed: expose::build(cluster, &added.exposing, read.routes_served),
        version: image.version,
        service_monitors_served: read.service_monitors_served,
        routes_served: read.routes_served,
    })
}

/// The resources operator of this cluster: the operator-wide settings with the cluster's
/// credentials Secret, its revision and whether the server's certificate comes with a CA.
fn build_resources_operator(
    cluster: &Infinispan,
    settings: &resources_operator::Settings,
    read: &Read,
) -> Result<resources_operator::Built, Problem> {
    let mut settings = settings.clone();
    settings.credentials_secret = read.operator_credentials.name_any();
    settings.credentials_revision = Some(read.credentials_revision.clone());
    settings.server_ca = read.server_ca;
    settings.client_certificate = read.client_certificate.clone();
    resources_operator::build_for(cluster, &settings)
        .map_err(|error| Problem::new(ProblemReason::InvalidResourcesOperator, error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::resources_operator::fixtures as resources_operator_fixtures;
    use crate::build::server::fixtures as server_fixtures;

    fn read() -> Read {
        Read {
            referenced: server_fixtures::referenced(),
            operator_credentials: server_fixtures::operator_secret(),
            credentials_revision: "0123456789abcdef".into(),
            server_ca: false,
            client_certificate: None,
            renew_at: None,
            service_monitors_served: false,
            routes_served: false,
            metrics_credentials: None,
        }
    }

    fn desired(cluster: &Infinispan) -> Desired {
        build(
            cluster,
            &server_fixtures::settings(),
            &resources_operator_fixtures::settings(),
            &read(),
        )
    }

    #[test]
    fn the_policy_refuses_a_foreign_image_and_allows_the_operators_own() {
        let (server, resources) = (
            server_fixtures::settings(),
            resources_operator_fixtures::settings(),
        );
        let policy = CrPolicy::default();
        let mut cluster = server_fixtures::cluster("demo", "team-a");
        assert!(refusal(&cluster, &server, &resources, &policy).is_none());
        cluster.spec.image = server.images.by_version.values().next().cloned();
        cluster.spec.resources_operator.image = Some(resources.image.clone());
        assert!(refusal(&cluster, &server, &resources, &policy).is_none());
        cluster.spec.image = Some("evil.example.com/miner:1".into());
        let problem = refusal(&cluster, &server, &resources, &policy).expect("refused");
        assert_eq!(problem.reason, ProblemReason::PolicyRefused);
        assert!(
            problem.message.contains("evil.example.com/miner:1"),
            "{}",
            problem.message
        );
    }

    #[test]
    fn a_problem_of_the_server_leaves_the_resources_operator_to_build() {
        let mut cluster = server_fixtures::cluster("demo", "team-a");
        let valid = desired(&cluster);
        let server = valid.server.expect("a valid CR builds");
        assert_eq!(server.version, "16.0.7");
        assert!(matches!(valid.resources_operator, Some(Ok(_))));
        assert_eq!(
            valid.operator_credentials_secret,
            "demo-operator-credentials"
        );

        cluster.spec.version = Some("99.0.0".into());
        let unknown = desired(&cluster);
        let problem = unknown.server.expect_err("no image for 99.0.0");
        assert_eq!(problem.reason, ProblemReason::UnsupportedVersion);
        assert!(problem.message.contains("99.0.0"), "{}", problem.message);
        assert!(matches!(unknown.resources_operator, Some(Ok(_))));

        cluster.spec.resources_operator.enabled = false;
        assert!(desired(&cluster).resources_operator.is_none());
    }
}
