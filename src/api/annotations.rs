//! Every `dray.dev/*` annotation and label key, in one place. Keys in [`PREFIX`] are
//! Dray's own: clients never set them on what they write (see `pipeline::door`).

/// The prefix of Dray's own keys.
pub const PREFIX: &str = "dray.dev/";

/// Asks a running promotion to abort; the value is who asked.
pub const ABORT: &str = "dray.dev/abort";
/// Who requested a promotion ([`super::Actor::name`]).
pub const ACTOR: &str = "dray.dev/actor";
/// Orders promotions in a Stage's queue (RFC 3339 with nanoseconds).
pub const REQUESTED_AT: &str = "dray.dev/requested-at";
/// A promotion through a closed window: `<user>: <reason> (window `<name>`)`.
pub const WINDOW_OVERRIDE: &str = "dray.dev/window-override";
/// The sign-offs that counted when a promotion was requested, one per line
/// (`<user>` or `<user> (<reason>)`): each becomes a `Dray-Signed-Off-By` trailer.
pub const SIGNED_OFF_BY: &str = "dray.dev/signed-off-by";
/// A promotion through a freeze (`dray freeze`): `frozen by <user>: <reason> (…);
/// overridden by <user>: <reason>`, written to its commit as the `Dray-Override` trailer.
pub const FREEZE_OVERRIDE: &str = "dray.dev/freeze-override";
/// Wakes a waiting promotion at once (set by webhooks); any new value.
pub const WAKE: &str = "dray.dev/wake";
/// Asks a Warehouse to look again; any new value.
pub const REFRESH: &str = "dray.dev/refresh";
/// Freight assembled by hand (`dray freight create`, the hotfix path) rather than minted
/// by discovery; the value is `true`.
pub const ASSEMBLED: &str = "dray.dev/assembled";

/// Label: the Stage a Promotion is for.
pub const STAGE_LABEL: &str = "dray.dev/stage";
/// Label: the Freight a Promotion promotes.
pub const FREIGHT_LABEL: &str = "dray.dev/freight";
/// Label: the Warehouse that minted a Freight.
pub const WAREHOUSE_LABEL: &str = "dray.dev/warehouse";
/// Label: a built-in Role.
pub const BUILTIN_LABEL: &str = "dray.dev/built-in";

/// Whether `key` is one of Dray's own.
pub fn is_reserved(key: &str) -> bool {
    key.starts_with(PREFIX)
}
