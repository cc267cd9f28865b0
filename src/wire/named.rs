// Names that arrive as text (the companion protocol, recordings, alert JSON) but that code
// matches on. Each is an enum with one variant per known name and `Other` for a name this
// build does not know, so a newer companion or an older recording still loads and shows its
// own word, and a renamed variant breaks the build instead of silently failing a string
// comparison. They serialise as the same bare strings as before, so the wire, recordings and
// `--alerts-jsonl` lines are unchanged. The protocol's own names live here, where its
// messages can use them; the rest of gpumon's (`model::named`) use the same macro.

/// Defines such an enum: `named! { pub enum Framework { Torch = "torch", ... } }`.
macro_rules! named {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A name this build does not know, kept as it came.
            Other(String),
        }

        impl $name {
            /// Every name this build knows, in declaration order (tests walk them all).
            #[cfg(test)]
            pub const KNOWN: &'static [&'static str] = &[$($text),+];

            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(s) => s,
                }
            }
        }

        /// The empty name: what a message that leaves the field out carries.
        impl Default for $name {
            fn default() -> Self {
                $name::Other(String::new())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name::from(s.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $text => $name::$variant, )+
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Ok($name::from(s.as_ref()))
            }
        }
    };
}

pub(crate) use named;

named! {
    /// Who says hello (`hello.role`).
    pub enum Role {
        /// The Python companion.
        Companion = "companion",
        /// The native interposer (`LD_PRELOAD`), driver-level.
        Interposer = "interposer",
        /// gpumon itself, in its hello to a companion.
        Monitor = "monitor",
    }
}

named! {
    /// Which framework's allocator a companion reads (`hello.framework`).
    pub enum Framework {
        Torch = "torch",
        Jax = "jax",
        Tensorflow = "tensorflow",
        /// The native interposer: `cudaMalloc`/`cuMemAlloc` calls, no framework pool.
        CudaDriver = "cuda-driver",
        /// A Python companion in a process with no framework it can read.
        None = "none",
    }
}

named! {
    /// What a companion `event` reports.
    pub enum EventKind {
        /// The framework raised out-of-memory.
        Oom = "oom",
        /// The allocator retried after freeing its cache.
        AllocRetry = "alloc_retry",
        /// The allocator's settings changed: growth before it is another regime.
        ConfigChange = "config_change",
        Error = "error",
    }
}
