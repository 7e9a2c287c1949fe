//! RECONNECT and WAIT_CLOSE (PgBouncer's `close_needed`): backends open when
//! RECONNECT ran are closed as they come back, instead of being handed out
//! again. Backend ids only grow, so one id per pool marks them all: those
//! up to it. The hand-off (`Pool::retire_reason`) and the checkout check
//! (`BackendManager::recycle`) both ask `BackendManager::close_needed`.

use std::sync::atomic::Ordering;

use super::{Pool, ServerInfo};

impl Pool {
    /// RECONNECT: every backend open or opening now is closed once it is
    /// next released (the idle ones at once); backends opened from now on
    /// are not affected.
    pub fn reconnect(&self) {
        let manager = self.inner.manager();
        let upto = manager.ids.last();
        manager.reconnect_upto.fetch_max(upto, Ordering::Relaxed);
        self.close_marked_idle();
    }

    /// True when RECONNECT marked backend `id` to be closed at its release
    /// (PgBouncer's `close_needed`).
    pub fn close_needed(&self, id: u64) -> bool {
        self.inner.manager().close_needed(id)
    }

    /// True while a backend RECONNECT marked is still open; closes the
    /// marked ones that are idle (one released between the mark and the
    /// first sweep may have slipped back in). A backend still logging in
    /// when RECONNECT ran counts once it is open.
    pub fn closing(&self) -> bool {
        self.close_marked_idle();
        let manager = self.inner.manager();
        let marked = |s: &ServerInfo| manager.close_needed(s.id);
        self.servers().list().iter().any(marked)
    }

    /// Closes the idle backends RECONNECT marked.
    fn close_marked_idle(&self) {
        let manager = self.inner.manager();
        self.inner
            .retain(|obj, _| !manager.close_needed(obj.backend.id()));
    }
}
