//! The words of agy's command line that the bridge also speaks: `--mode`,
//! `--effort` and how a conversation is bound (docs/agy-format.md, "CLI
//! surface"). They live here, below every layer, because settings
//! (agy-bridge's `state::config`), the model catalog (agy-bridge's `pi::models`) and
//! the runner all use them.

use serde::Serialize;

/// An enum spelled as fixed words on agy's command line and in ours:
/// `as_arg`, `FromStr` (with an error listing the words) and serde as the
/// word.
macro_rules! word_enum {
    ($(#[$m:meta])* $name:ident $what:literal { $($(#[$vm:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vm])* $variant,)+
        }

        impl $name {
            pub fn as_arg(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok($name::$variant),)+
                    other => Err(format!(
                        concat!("unknown ", $what, " {:?} (expected one of: {})"),
                        other,
                        [$($word),+].join(", ")
                    )),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_arg())
            }
        }
    };
}

word_enum! {
    /// How the conversation id is bound.
    BindMode "bind mode" {
        /// stream-json when `agy --version` says it is supported (>= 1.1.8),
        /// otherwise discovery. Falls back to discovery if no `init` line comes.
        Auto = "auto",
        /// Snapshot/diff, process tree and subagent filter only.
        Discovery = "discovery",
        /// Pass `--output-format stream-json` and take the id from the `init` line.
        StreamJson = "stream-json",
    }
}

word_enum! {
    /// `--mode`.
    Mode "mode" {
        AcceptEdits = "accept-edits",
        Plan = "plan",
    }
}

word_enum! {
    /// `--effort`, ordered low to high.
    Effort "effort" {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}
