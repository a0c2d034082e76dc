//! Internally tagged enums (`{"role": "user", ...}`) read without serde's buffering.
//!
//! serde's derive for `#[serde(tag = "...")]` first collects the whole object into an untyped
//! tree, because the tag may come last; nested tagged enums are collected again. Loading a long
//! session spends most of its time there. Every writer of these objects (gjc, and the session
//! files of its ancestors) puts the tag first, so [`deserialize`] reads the first key: when it is
//! the tag, the rest of the object goes straight to the variant; otherwise the object is
//! collected into a `serde_json::Value` and read from there, as serde would.
//!
//! The variants are described by an *externally* tagged twin of the enum (serde's `remote`
//! derive), wrapped in a newtype that implements `Deserialize`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, VariantAccess, Visitor,
};
use serde::Deserialize;
use serde_json::Value;

/// Reads a map tagged by `tag` into `T`, an externally tagged description of the same enum.
pub fn deserialize<'de, D, T>(
    deserializer: D,
    tag: &'static str,
    expecting: &'static str,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_map(TaggedVisitor {
        tag,
        expecting,
        marker: PhantomData,
    })
}

struct TaggedVisitor<T> {
    tag: &'static str,
    expecting: &'static str,
    marker: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(Name(first)) = map.next_key::<Name>()? else {
            return Err(de::Error::missing_field(self.tag));
        };
        if first == self.tag {
            let Name(variant) = map.next_value()?;
            return T::deserialize(Variant {
                name: variant,
                rest: MapAccessDeserializer::new(map),
            });
        }
        // The tag is not first: collect the object, as serde's derive always does.
        let mut object = serde_json::Map::new();
        object.insert(first.into_owned(), map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            object.insert(key, value);
        }
        let name = match object.remove(self.tag) {
            Some(Value::String(name)) => name,
            Some(_) => {
                return Err(de::Error::custom(format!(
                    "`{}` must be a string",
                    self.tag
                )))
            }
            None => return Err(de::Error::missing_field(self.tag)),
        };
        T::deserialize(Variant {
            name: Cow::Owned(name),
            rest: Value::Object(object),
        })
        .map_err(de::Error::custom)
    }
}

/// A key or tag value, borrowed from the input when it has no escapes.
struct Name<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        d.deserialize_str(NameVisitor)
    }
}

/// An enum value presented the externally tagged way: the variant's name, then its fields.
struct Variant<'de, R> {
    name: Cow<'de, str>,
    rest: R,
}

impl<'de, R> Deserializer<'de> for Variant<'de, R>
where
    R: Deserializer<'de>,
{
    type Error = R::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, R::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

impl<'de, R: Deserializer<'de>> EnumAccess<'de> for Variant<'de, R> {
    type Error = R::Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), R::Error> {
        let value = seed.deserialize(StrDeserializer::<R::Error>::new(&self.name))?;
        Ok((value, self))
    }
}

impl<'de, R: Deserializer<'de>> VariantAccess<'de> for Variant<'de, R> {
    type Error = R::Error;

    fn unit_variant(self) -> Result<(), R::Error> {
        de::IgnoredAny::deserialize(self.rest).map(drop)
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, R::Error> {
        seed.deserialize(self.rest)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, R::Error> {
        self.rest.deserialize_tuple(len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, R::Error> {
        self.rest.deserialize_struct("", fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    enum Shape {
        Circle { radius: f64 },
        Square(Side),
        Dot,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Side {
        side: f64,
    }

    #[derive(Debug, PartialEq)]
    struct Tagged(Shape);

    impl<'de> Deserialize<'de> for Tagged {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            deserialize(d, "kind", "a shape").map(Tagged)
        }
    }

    fn parse(json: &str) -> Result<Shape, serde_json::Error> {
        serde_json::from_str::<Tagged>(json).map(|t| t.0)
    }

    #[test]
    fn tag_first_and_tag_later_read_the_same() {
        let circle = Shape::Circle { radius: 2.0 };
        assert_eq!(parse(r#"{"kind":"circle","radius":2}"#).unwrap(), circle);
        assert_eq!(parse(r#"{"radius":2,"kind":"circle"}"#).unwrap(), circle);
        let square = Shape::Square(Side { side: 1.5 });
        assert_eq!(
            parse(r#"{"kind":"square","side":1.5,"x":[1]}"#).unwrap(),
            square
        );
        assert_eq!(parse(r#"{"side":1.5,"kind":"square"}"#).unwrap(), square);
        assert_eq!(
            parse(r#"{"kind":"dot","ignored":{"a":1}}"#).unwrap(),
            Shape::Dot
        );
        assert_eq!(
            parse(r#"{"kind":"c\u0069rcle","radius":2}"#).unwrap(),
            circle
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let err = |json| parse(json).unwrap_err().to_string();
        assert!(err(r#"{"kind":"hexagon"}"#).contains("unknown variant `hexagon`"));
        assert!(err(r#"{"radius":2}"#).contains("missing field `kind`"));
        assert!(err(r#"{}"#).contains("missing field `kind`"));
        assert!(err(r#"{"kind":"circle"}"#).contains("missing field `radius`"));
        assert!(err(r#"{"radius":2,"kind":7}"#).contains("`kind` must be a string"));
        assert!(err(r#"[1]"#).contains("expected a shape"));
    }
}
