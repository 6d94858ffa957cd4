//! The NUMA placement of containers, as resource-topology-exporter publishes it: which
//! single NUMA node each container's exclusive resources (CPUs, memory, devices) come
//! from, in two NRT attributes.
//!
//! - [`METADATA`] (top level): `npv0v001::ve=leb89::cc=<containers>::nn=<NUMA nodes>::bn=<busiest>`.
//! - [`VECTOR`] (on zone `node-N`, for every NUMA node with containers but the busiest):
//!   the positions of its containers in the sorted list of every encoded container's
//!   hash, ascending, the first as is and the others as deltas, each as a LEB89 number.
//!   The busiest node's containers are those no vector names.
//!
//! A container's hash is XXH64 (seed 0) of `namespace \0 pod name \0 container name`.
//! Decoding needs the exact set of containers the writer encoded (their count is in the
//! metadata): the reader supplies it from the pods it knows on the node, and a set of
//! another size is refused ([`PlacementError::ContainerCount`]).
//!
//! LEB89 writes a number with the 89 printable ASCII characters JSON leaves unescaped
//! (`!` to `~` without `"`, `&`, `<`, `>`, `\`): values below 64 are one terminal
//! character (the first 64); larger ones are continuation characters (the last 25, base
//! 25, most significant first) followed by a terminal one.

use std::collections::{BTreeMap, HashMap};

use xxhash_rust::xxh64::xxh64;

use super::v1alpha2::{AttributeInfo, NodeResourceTopology};

/// Top-level attribute: the encoding's version and sizes.
pub const METADATA: &str = "topology.node.k8s.io/numaplacement-metadata";
/// Zone attribute: the containers placed on that NUMA node.
pub const VECTOR: &str = "topology.node.k8s.io/numaplacement-vector";
/// The metadata's prefix and version.
const PREFIX: &str = "npv0v001";
const SEPARATOR: &str = "::";
/// The only vector encoding defined.
pub const ENCODING_LEB89: &str = "leb89";
/// Most containers or NUMA nodes a payload may declare (larger is refused as malformed).
const MAX_COUNT: usize = 1 << 20;

const TERMINALS: u32 = 64;
const CONTINUATIONS: u32 = 25;

/// What is wrong with a placement payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The metadata does not start with the known prefix and version.
    #[error("metadata {0:?} is not npv0v001")]
    Version(String),
    /// A metadata field is malformed, unknown or out of range.
    #[error("metadata field {0:?} is malformed or unknown")]
    Field(String),
    /// A vector encoding other than LEB89.
    #[error("vector encoding {0:?} is not supported")]
    Encoding(String),
    /// The sizes contradict each other (busiest node, vectors, NUMA nodes).
    #[error("inconsistent payload: {0}")]
    Inconsistent(&'static str),
    /// A vector is not valid LEB89 or names a position twice or out of range.
    #[error("vector of NUMA node {0} is corrupted")]
    Vector(usize),
    /// The reader's container set differs in size from the writer's.
    #[error("the payload encodes {encoded} containers, the reader knows {known}")]
    ContainerCount {
        /// Containers in the payload.
        encoded: usize,
        /// Containers the reader supplied.
        known: usize,
    },
    /// A container affinity names a NUMA node the payload does not have.
    #[error("NUMA node {0} is out of range")]
    Node(usize),
}

/// A container by its identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerRef {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
}

impl ContainerRef {
    /// Builds a reference.
    pub fn new(namespace: &str, pod: &str, container: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            container: container.to_owned(),
        }
    }

    /// The container's hash in the encoding.
    pub fn hash(&self) -> u64 {
        let mut bytes =
            Vec::with_capacity(self.namespace.len() + self.pod.len() + self.container.len() + 2);
        bytes.extend_from_slice(self.namespace.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(self.pod.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(self.container.as_bytes());
        xxh64(&bytes, 0)
    }
}

/// The attributes' content: sizes and the per-NUMA-node vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// How many containers are encoded.
    pub containers: usize,
    /// How many NUMA nodes the machine has (ids `0..numa_nodes`).
    pub numa_nodes: usize,
    /// The NUMA node with the most containers, which has no vector.
    pub busiest: usize,
    /// NUMA node → LEB89 vector.
    pub vectors: BTreeMap<usize, String>,
}

impl Payload {
    /// Encodes `placements` (container, NUMA node) for a machine of `numa_nodes` NUMA
    /// nodes; a container given twice keeps its last node.
    pub fn encode(
        numa_nodes: usize,
        placements: impl IntoIterator<Item = (ContainerRef, usize)>,
    ) -> Result<Self, PlacementError> {
        let mut by_hash: BTreeMap<u64, usize> = BTreeMap::new();
        for (container, node) in placements {
            if node >= numa_nodes {
                return Err(PlacementError::Node(node));
            }
            by_hash.insert(container.hash(), node);
        }
        let mut per_node: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for (position, node) in by_hash.values().enumerate() {
            per_node
                .entry(*node)
                .or_default()
                .push(u32::try_from(position).unwrap_or(u32::MAX));
        }
        // The first node of the largest count (ascending ids) is the busiest.
        let mut busiest = 0;
        let mut most = 0;
        for (node, positions) in &per_node {
            if positions.len() > most {
                most = positions.len();
                busiest = *node;
            }
        }
        let vectors = per_node
            .into_iter()
            .filter(|(node, _)| *node != busiest)
            .map(|(node, positions)| (node, encode_vector(&positions)))
            .collect();
        Ok(Self {
            containers: by_hash.len(),
            numa_nodes,
            busiest,
            vectors,
        })
    }

    /// The top-level attribute's value.
    pub fn metadata(&self) -> String {
        format!(
            "{PREFIX}{SEPARATOR}ve={ENCODING_LEB89}{SEPARATOR}cc={}{SEPARATOR}nn={}{SEPARATOR}bn={}",
            self.containers, self.numa_nodes, self.busiest
        )
    }

    /// Reads the metadata attribute and the zones' vectors (NUMA node → value).
    pub fn parse(metadata: &str, vectors: BTreeMap<usize, String>) -> Result<Self, PlacementError> {
        let rest = metadata
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(SEPARATOR))
            .ok_or_else(|| PlacementError::Version(metadata.chars().take(64).collect()))?;
        let (mut encoding, mut containers, mut numa_nodes, mut busiest) = (None, None, None, None);
        for field in rest.split(SEPARATOR) {
            let bad = || PlacementError::Field(field.chars().take(64).collect());
            let (key, value) = field.split_once('=').ok_or_else(bad)?;
            if value.is_empty() {
                return Err(bad());
            }
            let number = || {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n <= MAX_COUNT)
                    .ok_or_else(bad)
            };
            match key {
                "ve" => encoding = Some(value.to_owned()),
                "cc" => containers = Some(number()?),
                "nn" => numa_nodes = Some(number()?),
                "bn" => busiest = Some(number()?),
                _ => return Err(bad()),
            }
        }
        let encoding = encoding.unwrap_or_default();
        if encoding != ENCODING_LEB89 {
            return Err(PlacementError::Encoding(encoding));
        }
        let (Some(containers), Some(numa_nodes), Some(busiest)) = (containers, numa_nodes, busiest)
        else {
            return Err(PlacementError::Inconsistent("a size is missing"));
        };
        let payload = Self {
            containers,
            numa_nodes,
            busiest,
            vectors,
        };
        payload.validate()?;
        Ok(payload)
    }

    /// The payload `nrt` carries: `None` without the metadata attribute; the vectors
    /// come from the NUMA zones (`node-N`) carrying [`VECTOR`].
    pub fn from_nrt(nrt: &NodeResourceTopology) -> Option<Result<Self, PlacementError>> {
        let metadata = nrt.attribute(METADATA)?;
        let mut vectors = BTreeMap::new();
        for zone in nrt.zones.iter().filter(|z| z.is_numa_node()) {
            let vector = zone.attributes.iter().find(|a| a.name == VECTOR);
            if let (Ok(id), Some(v)) = (zone.numa_id(), vector) {
                vectors.insert(id as usize, v.value.clone());
            }
        }
        Some(Self::parse(metadata, vectors))
    }

    /// Writes the payload into `nrt`: the metadata attribute (replacing an earlier one)
    /// and each vector on its NUMA zone (zones without one lose theirs).
    pub fn write_into(&self, nrt: &mut NodeResourceTopology) {
        nrt.attributes.retain(|a| a.name != METADATA);
        nrt.attributes
            .push(AttributeInfo::new(METADATA, self.metadata()));
        nrt.attributes.sort_by(|a, b| a.name.cmp(&b.name));
        for zone in nrt.zones.iter_mut().filter(|z| z.is_numa_node()) {
            let Ok(id) = zone.numa_id() else { continue };
            let attributes = &mut zone.attributes;
            attributes.retain(|a| a.name != VECTOR);
            if let Some(v) = self.vectors.get(&(id as usize)) {
                attributes.push(AttributeInfo::new(VECTOR, v.clone()));
                attributes.sort_by(|a, b| a.name.cmp(&b.name));
            }
        }
    }

    fn validate(&self) -> Result<(), PlacementError> {
        if self.numa_nodes == 0 {
            return Err(PlacementError::Inconsistent("no NUMA node"));
        }
        if self.busiest >= self.numa_nodes {
            return Err(PlacementError::Inconsistent(
                "the busiest node is out of range",
            ));
        }
        if self.vectors.contains_key(&self.busiest) {
            return Err(PlacementError::Inconsistent(
                "the busiest node has a vector",
            ));
        }
        if self.containers == 0 && !self.vectors.is_empty() {
            return Err(PlacementError::Inconsistent("vectors without containers"));
        }
        match self.vectors.keys().find(|&&n| n >= self.numa_nodes) {
            Some(&node) => Err(PlacementError::Node(node)),
            None => Ok(()),
        }
    }

    /// The NUMA node of every container of `known`, which must be exactly the set the
    /// writer encoded (duplicates count once).
    pub fn decode(
        &self,
        known: impl IntoIterator<Item = ContainerRef>,
    ) -> Result<HashMap<ContainerRef, usize>, PlacementError> {
        let mut by_hash: BTreeMap<u64, ContainerRef> = BTreeMap::new();
        for c in known {
            by_hash.insert(c.hash(), c);
        }
        if by_hash.len() != self.containers {
            return Err(PlacementError::ContainerCount {
                encoded: self.containers,
                known: by_hash.len(),
            });
        }
        let sorted: Vec<&ContainerRef> = by_hash.values().collect();
        let mut node_of: Vec<Option<usize>> = vec![None; sorted.len()];
        for (&node, vector) in &self.vectors {
            for position in decode_vector(vector).ok_or(PlacementError::Vector(node))? {
                let slot = node_of
                    .get_mut(position as usize)
                    .ok_or(PlacementError::Vector(node))?;
                if slot.replace(node).is_some() {
                    return Err(PlacementError::Vector(node));
                }
            }
        }
        Ok(sorted
            .into_iter()
            .zip(node_of)
            .map(|(c, node)| (c.clone(), node.unwrap_or(self.busiest)))
            .collect())
    }
}

/// The 89 characters, terminals first.
fn alphabet() -> impl Iterator<Item = u8> {
    (0x21u8..=0x7e).filter(|b| !matches!(b, b'"' | b'&' | b'<' | b'>' | b'\\'))
}

fn digit(index: u32) -> char {
    alphabet().nth(index as usize).map_or('!', char::from)
}

fn index_of(c: u8) -> Option<u32> {
    alphabet().position(|b| b == c).map(|i| i as u32)
}

/// One number in LEB89.
pub fn encode_number(out: &mut String, value: u32) {
    if value < TERMINALS {
        out.push(digit(value));
        return;
    }
    let rest = value - TERMINALS;
    let terminal = rest % TERMINALS;
    let mut high = rest / TERMINALS;
    let mut digits = Vec::new();
    loop {
        digits.push(high % CONTINUATIONS);
        high /= CONTINUATIONS;
        if high == 0 {
            break;
        }
    }
    for d in digits.iter().rev() {
        out.push(digit(TERMINALS + d));
    }
    out.push(digit(terminal));
}

/// Ascending positions, delta-encoded.
fn encode_vector(positions: &[u32]) -> String {
    let mut out = String::new();
    let mut previous = 0;
    for (i, &p) in positions.iter().enumerate() {
        encode_number(&mut out, if i == 0 { p } else { p - previous });
        previous = p;
    }
    out
}

/// The positions of a vector; `None` when it is not valid LEB89 (a character outside
/// the alphabet, a number cut short, one beyond `u32`).
pub fn decode_vector(vector: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut high: u64 = 0;
    let mut continued = false;
    let mut previous: u64 = 0;
    for &b in vector.as_bytes() {
        let index = index_of(b)?;
        if index >= TERMINALS {
            high = high * u64::from(CONTINUATIONS) + u64::from(index - TERMINALS);
            continued = true;
            if high > u64::from(u32::MAX) {
                return None;
            }
            continue;
        }
        let value = if continued {
            u64::from(TERMINALS) + high * u64::from(TERMINALS) + u64::from(index)
        } else {
            u64::from(index)
        };
        let position = if out.is_empty() {
            value
        } else {
            previous + value
        };
        previous = position;
        out.push(u32::try_from(position).ok()?);
        high = 0;
        continued = false;
    }
    (!continued).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(pod: &str, container: &str) -> ContainerRef {
        ContainerRef::new("ns", pod, container)
    }

    #[test]
    fn leb89_numbers() {
        let enc = |v| {
            let mut s = String::new();
            encode_number(&mut s, v);
            s
        };
        assert_eq!(enc(0), "!");
        // The 64th character: from 0x21, skipping `"`, `&` and `<` before it.
        assert_eq!(enc(63), "e");
        assert_eq!(enc(64), "f!");
        assert_eq!(enc(1663), "~e");
        assert_eq!(enc(1664), "gf!");
        for v in [0, 1, 63, 64, 65, 1663, 1664, 40_063, 40_064, 1 << 24] {
            assert_eq!(decode_vector(&enc(v)), Some(vec![v]), "{v}");
        }
        assert_eq!(decode_vector("f"), None, "cut short");
        assert_eq!(decode_vector("\""), None, "outside the alphabet");
        assert_eq!(decode_vector("!#%"), Some(vec![0, 1, 4]));
    }

    #[test]
    fn xxh64_of_the_identity() {
        // XXH64 of the empty input, seed 0 (the algorithm's published value).
        assert_eq!(xxh64(b"", 0), 0xef46_db37_51d8_e999);
        let id = c("p", "app");
        assert_eq!(id.hash(), xxh64(b"ns\0p\0app", 0));
    }

    #[test]
    fn round_trip_and_the_busiest_node() {
        let placements = [
            (c("a", "app"), 0),
            (c("b", "app"), 1),
            (c("b", "side"), 1),
            (c("d", "app"), 3),
        ];
        let payload = Payload::encode(4, placements.clone()).expect("encodes");
        assert_eq!((payload.containers, payload.busiest), (4, 1));
        assert!(!payload.vectors.contains_key(&1));
        assert_eq!(payload.vectors.len(), 2);
        let parsed = Payload::parse(&payload.metadata(), payload.vectors.clone()).expect("parses");
        assert_eq!(parsed, payload);
        let decoded = parsed
            .decode(placements.iter().map(|(c, _)| c.clone()))
            .expect("decodes");
        for (container, node) in placements {
            assert_eq!(decoded[&container], node);
        }
    }

    /// Six containers on three NUMA nodes, encoded by an independent implementation of
    /// the format (XXH64 from the `xxhash` Python package, sorted, LEB89 deltas): the
    /// attributes resource-topology-exporter writes for them.
    #[test]
    fn reads_what_resource_topology_exporter_writes() {
        let metadata = "npv0v001::ve=leb89::cc=6::nn=3::bn=1";
        let vectors = BTreeMap::from([(0, "#'".to_owned()), (2, "'".to_owned())]);
        let payload = Payload::parse(metadata, vectors.clone()).expect("parses");
        let placed = [
            (ContainerRef::new("team-a", "trainer-0", "worker"), 0),
            (ContainerRef::new("team-a", "trainer-0", "sidecar"), 0),
            (ContainerRef::new("team-a", "trainer-1", "worker"), 1),
            (ContainerRef::new("team-b", "infer", "server"), 2),
            (ContainerRef::new("team-b", "infer", "proxy"), 1),
            (ContainerRef::new("team-b", "db", "pg"), 1),
        ];
        let decoded = payload
            .decode(placed.iter().map(|(c, _)| c.clone()))
            .expect("decodes");
        for (c, node) in &placed {
            assert_eq!(decoded[c], *node, "{c:?}");
        }
        // And the encoder writes the same attributes.
        let ours = Payload::encode(3, placed).expect("encodes");
        assert_eq!(ours.metadata(), metadata);
        assert_eq!(ours.vectors, vectors);
    }

    #[test]
    fn malformed_payloads_are_refused_with_a_reason() {
        let v = BTreeMap::new;
        assert!(matches!(
            Payload::parse("npv1v001::ve=leb89::cc=0::nn=1::bn=0", v()),
            Err(PlacementError::Version(_))
        ));
        assert!(matches!(
            Payload::parse("npv0v001::ve=zstd::cc=0::nn=1::bn=0", v()),
            Err(PlacementError::Encoding(_))
        ));
        assert!(matches!(
            Payload::parse("npv0v001::ve=leb89::cc=x::nn=1::bn=0", v()),
            Err(PlacementError::Field(_))
        ));
        assert!(matches!(
            Payload::parse("npv0v001::ve=leb89::cc=1::nn=2::bn=2", v()),
            Err(PlacementError::Inconsistent(_))
        ));
        let busiest_vector = BTreeMap::from([(0, "!".to_owned())]);
        assert!(matches!(
            Payload::parse("npv0v001::ve=leb89::cc=1::nn=2::bn=0", busiest_vector),
            Err(PlacementError::Inconsistent(_))
        ));
        let payload = Payload::parse(
            "npv0v001::ve=leb89::cc=2::nn=2::bn=0",
            BTreeMap::from([(1, "!!".to_owned())]),
        )
        .expect("well formed");
        // Position 0 twice (a delta of 0), and the wrong number of containers.
        assert_eq!(
            payload.decode([c("a", "x"), c("b", "x")]),
            Err(PlacementError::Vector(1))
        );
        assert_eq!(
            payload.decode([c("a", "x")]),
            Err(PlacementError::ContainerCount {
                encoded: 2,
                known: 1
            })
        );
        let far = Payload::parse(
            "npv0v001::ve=leb89::cc=1::nn=2::bn=0",
            BTreeMap::from([(1, "#".to_owned())]),
        )
        .expect("well formed");
        assert_eq!(far.decode([c("a", "x")]), Err(PlacementError::Vector(1)));
    }
}
