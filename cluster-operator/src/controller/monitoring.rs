//! Whether the API server serves the Prometheus Operator's `ServiceMonitor` kind (its CRD is
//! installed): the cluster's ServiceMonitor and the metrics user exist only then. The same for
//! OpenShift's `Route` (`spec.expose.type: Route`). Asked by
//! discovery at every reconcile (one small GET, allowed to every authenticated identity), so
//! that a CRD installed or removed later is followed at the next reconcile.

use crate::build::server::{SERVICE_MONITOR_API_GROUP_VERSION, SERVICE_MONITOR_PLURAL};

/// Whether `servicemonitors` is a resource of `monitoring.coreos.com/v1`; a group or version
/// the API server does not know (404) is `false`, any other failure an error.
pub async fn service_monitors_served(client: &kube::Client) -> Result<bool, kube::Error> {
    served(
        client,
        SERVICE_MONITOR_API_GROUP_VERSION,
        SERVICE_MONITOR_PLURAL,
    )
    .await
}

/// Whether OpenShift's `routes` are a resource of `route.openshift.io/v1` (asked only for a
/// CR exposed by a Route, at each of its reconciles).
pub async fn routes_served(client: &kube::Client) -> Result<bool, kube::Error> {
    served(
        client,
        crate::build::expose::ROUTE_API_GROUP_VERSION,
        crate::build::expose::ROUTE_PLURAL,
    )
    .await
}

async fn served(
    client: &kube::Client,
    group_version: &str,
    plural: &str,
) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|resource| resource.name == plural)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}
