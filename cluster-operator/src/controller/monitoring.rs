//! Whether the API server serves the Prometheus Operator's `ServiceMonitor` kind (its CRD is
//! installed): the cluster's ServiceMonitor and the metrics user exist only then. Asked by
//! discovery at every reconcile (one small GET, allowed to every authenticated identity), so
//! that a CRD installed or removed later is followed at the next reconcile.

use crate::build::server::{SERVICE_MONITOR_API_GROUP_VERSION, SERVICE_MONITOR_PLURAL};

/// Whether `servicemonitors` is a resource of `monitoring.coreos.com/v1`; a group or version
/// the API server does not know (404) is `false`, any other failure an error.
pub async fn service_monitors_served(client: &kube::Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(SERVICE_MONITOR_API_GROUP_VERSION)
        .await
    {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|resource| resource.name == SERVICE_MONITOR_PLURAL)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}
