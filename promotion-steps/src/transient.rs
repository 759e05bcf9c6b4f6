//! Which HTTP answers mean "later" rather than "no": 429 (too many requests) and any 5xx.
//! One rule for every service Dray waits on — registries (discovery), forges and Argo CD —
//! so a step or a Warehouse asks again after these instead of failing.

/// Whether an answer with this status may succeed when asked again, unchanged.
pub fn is_transient_status(status: u16) -> bool {
    status == 429 || status >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_is_429_and_every_5xx() {
        for later in [429, 500, 502, 503, 504] {
            assert!(is_transient_status(later), "{later}");
        }
        for no in [200, 400, 401, 403, 404, 409, 422] {
            assert!(!is_transient_status(no), "{no}");
        }
    }
}
