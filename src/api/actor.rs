//! Who set a promotion going: a person (an API-token or OIDC user; `anonymous` only under
//! `dray serve --auth none`) or Dray's own auto-promotion. Recorded on every Promotion (the
//! [`super::annotations::ACTOR`] annotation) and in the `Dray-Actor` trailer of the commit it
//! writes, so the stage branch says who decided.

use std::fmt;

/// The name auto-promotion acts under. No person can hold it: user names that start with
/// [`RESERVED_PREFIX`] are refused where users are made (`dray token create`).
pub const AUTO_PROMOTION: &str = "dray:auto-promotion";

/// Names that start with this are Dray's own, never a person's.
pub const RESERVED_PREFIX: &str = "dray:";

/// Who asked for a promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// An authenticated person, by the name their token or identity provider gives.
    Person(String),
    /// Dray's auto-promotion, following the Project's policy.
    AutoPromotion,
}

impl Actor {
    /// The name recorded for this actor.
    pub fn name(&self) -> &str {
        match self {
            Actor::Person(name) => name,
            Actor::AutoPromotion => AUTO_PROMOTION,
        }
    }

    /// The actor a recorded name stands for; `None` for an empty one.
    pub fn from_recorded(name: &str) -> Option<Actor> {
        match name {
            "" => None,
            AUTO_PROMOTION => Some(Actor::AutoPromotion),
            person => Some(Actor::Person(person.to_owned())),
        }
    }

    /// Whether Dray itself, not a person, asked.
    pub fn is_auto_promotion(&self) -> bool {
        matches!(self, Actor::AutoPromotion)
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_name_reads_back_as_the_same_actor() {
        for actor in [Actor::Person("ann".into()), Actor::AutoPromotion] {
            assert_eq!(Actor::from_recorded(actor.name()), Some(actor));
        }
        assert_eq!(Actor::from_recorded(""), None);
    }
}
