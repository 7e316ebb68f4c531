//! Cross-site operations a user needs in an incident (`docs/cross-site.md`), as the server's REST
//! API gives them (measured on 16.0.7): the status of each backup site, taking a site offline
//! and bringing it back, and pushing a cache's state to a site that lost it.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::client::{Client, Req};
use crate::error::Error;
use crate::names::encode;

/// What the node says of one backup site (`GET /rest/v2/container/x-site/backups`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct SiteStatus {
    /// `online`, `offline`, or `mixed` (caches or nodes disagree).
    pub status: String,
}

/// A site operation of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteAction {
    TakeOffline,
    BringOnline,
    /// Sends every entry of the cache to the site (state transfer).
    StartPushState,
    CancelPushState,
}

impl SiteAction {
    fn as_str(self) -> &'static str {
        match self {
            Self::TakeOffline => "take-offline",
            Self::BringOnline => "bring-online",
            Self::StartPushState => "start-push-state",
            Self::CancelPushState => "cancel-push-state",
        }
    }
}

impl Client {
    /// The status of each backup site of the whole container.
    pub async fn site_statuses(&self) -> Result<BTreeMap<String, SiteStatus>, Error> {
        let what = "read the backup sites' status";
        self.expect(Req::get("/rest/v2/container/x-site/backups"), what, &[200])
            .await?
            .json(what)
    }

    /// `action` on the backup `site` of `cache`.
    pub async fn cache_site_action(
        &self,
        cache: &str,
        site: &str,
        action: SiteAction,
    ) -> Result<(), Error> {
        let what = format!("{} site {site} of cache {cache}", action.as_str());
        let request = Req::new(
            http::Method::POST,
            format!(
                "/rest/v2/caches/{}/x-site/backups/{}?action={}",
                encode(cache),
                encode(site),
                action.as_str()
            ),
        );
        self.expect(request, &what, &[200, 204]).await.map(|_| ())
    }
}
