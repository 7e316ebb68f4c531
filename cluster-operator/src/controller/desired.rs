//! Step 3 of a reconcile: validate the CR with what it references and build the objects it asks
//! for (pure). A problem of the input is a typed [`Problem`] (its [`ProblemReason`] is
//! the `Degraded` reason), never an error: nothing the API server does can fix it.

use common_crds::Infinispan;
use common_crds::conditions::ProblemReason;
use kube::ResourceExt;

use super::referenced::Read;
use super::status::Problem;
use crate::build::{expose, resources_operator, server};

/// The server's objects, ready to apply.
#[derive(Debug)]
pub struct Server {
    pub objects: server::Objects,
    /// The `spec.expose` Service or Ingress (none: a left-over one is deleted).
    pub exposed: expose::Exposed,
    /// The server version the image runs.
    pub version: String,
}

/// Everything a live CR asks for, built from the CR, the operator's settings and what the CR
/// references.
#[derive(Debug)]
pub struct Desired {
    /// The server's objects, or why they cannot be built.
    pub server: Result<Server, Problem>,
    /// The resources operator's objects, or why they cannot be built; `None` when
    /// `spec.resourcesOperator.enabled` is false.
    pub resources_operator: Option<Result<resources_operator::Objects, Problem>>,
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

fn build_server(
    cluster: &Infinispan,
    settings: &server::Settings,
    read: &Read,
) -> Result<Server, Problem> {
    let invalid = |error: server::BuildError| Problem::new(error.reason(), error);
    let image = settings.images.resolve(cluster).map_err(invalid)?;
    let objects = server::build(cluster, settings, &read.referenced).map_err(invalid)?;
    Ok(Server {
        objects,
        exposed: expose::build(cluster),
        version: image.version,
    })
}

/// The resources operator of this cluster: the operator-wide settings with the cluster's
/// credentials Secret, its revision and whether the server's certificate comes with a CA.
fn build_resources_operator(
    cluster: &Infinispan,
    settings: &resources_operator::Settings,
    read: &Read,
) -> Result<resources_operator::Objects, Problem> {
    let mut settings = settings.clone();
    settings.credentials_secret = read.operator_credentials.name_any();
    settings.credentials_revision = Some(read.credentials_revision.clone());
    settings.server_ca = read.server_ca;
    resources_operator::build(cluster, &settings)
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
