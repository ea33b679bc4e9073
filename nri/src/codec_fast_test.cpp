// SPDX-License-Identifier: Apache-2.0
// The hand-written hot-path decoder against the protobuf reference decoder (codec_internal.h):
// realistic messages, random well-formed messages (every field we read, unknown fields, repeated
// singular fields, wrong wire types, groups), and random corruptions of them.
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "codec_internal.h"
#include "colod/nri/testing/realistic.h"
#include "colod/testing/result_matchers.h"
#include "nri/proto/api.pb.h"
#include "pbwire.h"

namespace colod::nri::codec {
namespace {

namespace pb = ::nri::pkg::api::v1alpha1;
using Bytes = std::vector<std::byte>;

Bytes toBytes(const std::string& s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

// Field-by-field so a failure names the field.
void expectSame(const PodSandbox& a, const PodSandbox& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.namespace_name, b.namespace_name);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.annotations, b.annotations);
  EXPECT_EQ(a.runtime_handler, b.runtime_handler);
  EXPECT_EQ(a.cgroup_parent, b.cgroup_parent);
  EXPECT_EQ(a.cgroups_path, b.cgroups_path);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.ips, b.ips);
  EXPECT_EQ(a.pod_resources, b.pod_resources);
  EXPECT_EQ(a.pod_overhead, b.pod_overhead);
  EXPECT_EQ(a.resources, b.resources);
}

void expectSame(const Container& a, const Container& b, bool args_env = true) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.pod_sandbox_id, b.pod_sandbox_id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.annotations, b.annotations);
  if (args_env) {
    EXPECT_EQ(a.args, b.args);
    EXPECT_EQ(a.env, b.env);
  }
  EXPECT_EQ(a.cgroups_path, b.cgroups_path);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.resources, b.resources);
  EXPECT_EQ(a.oom_score_adj, b.oom_score_adj);
}

void expectSame(const SynchronizeRequest& a, const SynchronizeRequest& b, bool args_env) {
  EXPECT_EQ(a.more, b.more);
  ASSERT_EQ(a.pods.size(), b.pods.size());
  ASSERT_EQ(a.containers.size(), b.containers.size());
  for (std::size_t i = 0; i < a.pods.size(); ++i) {
    expectSame(a.pods[i], b.pods[i]);
  }
  for (std::size_t i = 0; i < a.containers.size(); ++i) {
    expectSame(a.containers[i], b.containers[i], args_env);
  }
}

// Decodes `in` with both decoders as every hot-path message type. Whenever the reference
// accepts, the fast decoder must accept and agree. Returns whether the reference accepted the
// input as a SynchronizeRequest.
bool checkAll(std::span<const std::byte> in) {
  auto rs = reference::decodeSynchronizeRequest(in);
  auto fs = fast::decodeSynchronizeRequest(in, {});
  auto fs_lean = fast::decodeSynchronizeRequest(in, {.args_env = false});
  if (rs) {
    EXPECT_TRUE(fs.has_value()) << fs.error().message();
    EXPECT_TRUE(fs_lean.has_value());
    if (fs && fs_lean) {
      expectSame(*rs, *fs, true);
      expectSame(*rs, *fs_lean, false);
      for (const auto& c : fs_lean->containers) {
        EXPECT_TRUE(c.args.empty() && c.env.empty());
      }
    }
  }
  if (auto r = reference::decodeContainerEvent(in)) {
    auto f = fast::decodeContainerEvent(in, {});
    EXPECT_TRUE(f.has_value());
    if (f) {
      expectSame(r->pod, f->pod);
      expectSame(r->container, f->container);
    }
  }
  if (auto r = reference::decodePodEvent(in)) {
    auto f = fast::decodePodEvent(in);
    EXPECT_TRUE(f.has_value());
    if (f) {
      expectSame(r->pod, f->pod);
    }
  }
  if (auto r = reference::decodeUpdateContainerRequest(in)) {
    auto f = fast::decodeUpdateContainerRequest(in);
    EXPECT_TRUE(f.has_value());
    if (f) {
      expectSame(r->pod, f->pod);
      expectSame(r->container, f->container);
      EXPECT_EQ(r->requested, f->requested);
    }
  }
  if (auto r = reference::decodeStateChange(in)) {
    auto f = fast::decodeStateChange(in);
    EXPECT_TRUE(f.has_value());
    if (f) {
      EXPECT_EQ(r->event, f->event);
      expectSame(r->pod, f->pod);
      EXPECT_EQ(r->container.has_value(), f->container.has_value());
      if (r->container && f->container) {
        expectSame(*r->container, *f->container);
      }
    }
  }
  return rs.has_value();
}

TEST(CodecFast, RealisticSynchronizeEqualsProtobuf) {
  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(10, 10, pods, ctrs);
  pb::SynchronizeRequest m;
  for (auto& p : pods) *m.add_pods() = p;
  for (auto& c : ctrs) *m.add_containers() = c;
  m.set_more(true);
  auto bytes = toBytes(m.SerializeAsString());
  auto f = ASSERT_OK(fast::decodeSynchronizeRequest(bytes, {}));
  auto r = ASSERT_OK(reference::decodeSynchronizeRequest(bytes));
  ASSERT_EQ(f.containers.size(), 100U);
  EXPECT_FALSE(f.containers[0].labels.empty());
  EXPECT_FALSE(f.containers[0].args.empty());
  EXPECT_TRUE(f.containers[0].resources.memory.limit.has_value());
  expectSame(r, f, true);
  EXPECT_TRUE(checkAll(bytes));
}

TEST(CodecFast, RealisticEventsEqualProtobuf) {
  auto pod = testing::realisticPod(3);
  pb::CreateContainerRequest c;
  *c.mutable_pod() = pod;
  *c.mutable_container() = testing::realisticContainer(7, pod);
  checkAll(toBytes(c.SerializeAsString()));
  pb::UpdateContainerRequest u;
  *u.mutable_pod() = pod;
  *u.mutable_container() = testing::realisticContainer(8, pod);
  u.mutable_linux_resources()->mutable_cpu()->mutable_shares()->set_value(7);
  checkAll(toBytes(u.SerializeAsString()));
  pb::StateChangeEvent s;
  s.set_event(pb::START_CONTAINER);
  *s.mutable_pod() = pod;
  *s.mutable_container() = testing::realisticContainer(9, pod);
  checkAll(toBytes(s.SerializeAsString()));
  auto ev = ASSERT_OK(fast::decodeStateChange(toBytes(s.SerializeAsString())));
  EXPECT_EQ(ev.event, Event::StartContainer);
  ASSERT_TRUE(ev.container.has_value());
}

// Maps are built once per message from entries recorded in wire order (StringMap::normalize):
// large maps (the stable_sort path), keys in random order, duplicates within one message and
// across a repeated message field (the second container/resources merges into the first), and
// labels interleaved with annotations and with a nested map (resources.unified).
TEST(CodecFast, LargeAndMergedMapsEqualProtobuf) {
  std::mt19937 rng(7);
  auto key = [&](int space) { return "k" + std::to_string(rng() % static_cast<unsigned>(space)); };
  for (int round = 0; round < 40; ++round) {
    const int n = round % 2 == 0 ? 100 : 20;
    std::string bytes;
    for (int part = 0; part < 2; ++part) {
      pb::StateChangeEvent s;
      s.set_event(pb::UPDATE_CONTAINER);
      auto* c = s.mutable_container();
      c->set_id("c");
      for (int i = 0; i < n; ++i) {
        auto* l = c->add_labels();
        l->set_key(key(n));
        l->set_value(std::to_string(rng()));
        auto* a = c->add_annotations();
        a->set_key(key(n / 2));
        a->set_value(std::string(rng() % 30, 'v'));
        auto* u = c->mutable_linux()->mutable_resources()->add_unified();
        u->set_key(key(5));
        u->set_value(std::to_string(i));
        auto* pl = s.mutable_pod()->add_labels();
        pl->set_key(key(n));
        pl->set_value(std::to_string(i));
      }
      bytes += s.SerializeAsString();  // concatenation = protobuf merge
    }
    const auto in = toBytes(bytes);
    auto f = ASSERT_OK(fast::decodeStateChange(in));
    auto r = ASSERT_OK(reference::decodeStateChange(in));
    ASSERT_TRUE(f.container && r.container);
    EXPECT_GT(f.container->labels.size(), 10U);
    expectSame(*r.container, *f.container);
    expectSame(r.pod, f.pod);
    checkAll(in);  // every message type: the fast decoder agrees whenever protobuf accepts
  }
}

// --- random well-formed messages --------------------------------------------------------------
class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 0; }
  std::string str() {
    static constexpr std::string_view kAlpha = "abcXYZ019-_./:= ";
    std::string s(static_cast<std::size_t>(pick(4) == 0 ? pick(40) : pick(6)), 'a');
    for (auto& ch : s) ch = kAlpha[static_cast<std::size_t>(pick(static_cast<int>(kAlpha.size())))];
    return s;
  }
  int64_t i64() {
    switch (pick(4)) {
      case 0: return 0;
      case 1: return -1 - pick(1000);
      case 2: return static_cast<int64_t>(rng_());
      default: return pick(100000);
    }
  }
  void entries(google::protobuf::RepeatedPtrField<pb::StringEntry>& out) {
    int n = pick(5);
    std::string last;
    for (int i = 0; i < n; ++i) {
      auto* e = out.Add();
      // Duplicate keys now and then (a later one wins).
      e->set_key(coin() && !last.empty() ? last : str());
      last = e->key();
      if (coin()) e->set_value(str());
    }
  }
  void resources(pb::LinuxResources& r) {
    if (coin()) {
      auto* m = r.mutable_memory();
      if (coin()) m->mutable_limit()->set_value(i64());
      if (coin()) m->mutable_reservation()->set_value(i64());
      if (coin()) m->mutable_swap();  // present, value 0
      if (coin()) m->mutable_kernel()->set_value(i64());
      if (coin()) m->mutable_kernel_tcp()->set_value(i64());
      if (coin()) m->mutable_swappiness()->set_value(static_cast<uint64_t>(i64()));
      if (coin()) m->mutable_disable_oom_killer()->set_value(coin());
      if (coin()) m->mutable_use_hierarchy()->set_value(coin());
    }
    if (coin()) {
      auto* c = r.mutable_cpu();
      if (coin()) c->mutable_shares()->set_value(static_cast<uint64_t>(i64()));
      if (coin()) c->mutable_quota()->set_value(i64());
      if (coin()) c->mutable_period()->set_value(static_cast<uint64_t>(i64()));
      if (coin()) c->mutable_realtime_runtime()->set_value(i64());
      if (coin()) c->mutable_realtime_period()->set_value(static_cast<uint64_t>(i64()));
      if (coin()) c->set_cpus(str());
      if (coin()) c->set_mems(str());
    }
    for (int i = pick(3); i > 0; --i) {
      auto* h = r.add_hugepage_limits();
      h->set_page_size(str());
      h->set_limit(static_cast<uint64_t>(i64()));
    }
    if (coin()) r.mutable_blockio_class()->set_value(str());
    if (coin()) r.mutable_rdt_class();
    entries(*r.mutable_unified());
    if (coin()) r.add_devices()->set_type("c");
    if (coin()) r.mutable_pids()->set_limit(i64());
  }
  pb::PodSandbox pod() {
    pb::PodSandbox p;
    if (coin()) p.set_id(str());
    if (coin()) p.set_name(str());
    if (coin()) p.set_uid(str());
    if (coin()) p.set_namespace_(str());
    entries(*p.mutable_labels());
    entries(*p.mutable_annotations());
    if (coin()) p.set_runtime_handler(str());
    if (coin()) {
      auto* l = p.mutable_linux();
      if (coin()) resources(*l->mutable_pod_overhead());
      if (coin()) resources(*l->mutable_pod_resources());
      if (coin()) l->set_cgroup_parent(str());
      if (coin()) l->set_cgroups_path(str());
      if (coin()) l->add_namespaces()->set_type("network");
      if (coin()) resources(*l->mutable_resources());
    }
    if (coin()) p.set_pid(static_cast<uint32_t>(i64()));
    for (int i = pick(3); i > 0; --i) p.add_ips(str());
    return p;
  }
  pb::Container container() {
    pb::Container c;
    if (coin()) c.set_id(str());
    if (coin()) c.set_pod_sandbox_id(str());
    if (coin()) c.set_name(str());
    if (coin()) c.set_state(static_cast<pb::ContainerState>(pick(7) - 1));
    entries(*c.mutable_labels());
    entries(*c.mutable_annotations());
    for (int i = pick(3); i > 0; --i) c.add_args(str());
    for (int i = pick(3); i > 0; --i) c.add_env(str());
    for (int i = pick(3); i > 0; --i) c.add_mounts()->set_destination(str());
    if (coin()) c.mutable_hooks()->add_prestart()->set_path(str());
    if (coin()) {
      auto* l = c.mutable_linux();
      if (coin()) resources(*l->mutable_resources());
      if (coin()) l->mutable_oom_score_adj()->set_value(i64());
      if (coin()) l->set_cgroups_path(str());
      if (coin()) l->add_devices()->set_path(str());
    }
    if (coin()) c.set_pid(static_cast<uint32_t>(i64()));
    if (coin()) c.set_exit_code(static_cast<int32_t>(i64()));
    return c;
  }

  // Appends wire-level oddities protobuf accepts: unknown fields of every wire type, a group,
  // a known field number with the wrong wire type, a repeated singular field (merge/overwrite).
  void oddities(std::string& s) {
    Bytes extra;
    for (int i = pick(4); i > 0; --i) {
      switch (pick(6)) {
        case 0:
          wire::pb::putTag(extra, static_cast<uint32_t>(100 + pick(50)), wire::pb::kVarint);
          wire::pb::putVarint(extra, static_cast<uint64_t>(i64()));
          break;
        case 1:
          wire::pb::putString(extra, static_cast<uint32_t>(100 + pick(50)), str());
          break;
        case 2:
          wire::pb::putTag(extra, 77, wire::pb::kFixed32);
          extra.insert(extra.end(), 4, std::byte{0x5a});
          break;
        case 3:
          wire::pb::putTag(extra, 78, wire::pb::kFixed64);
          extra.insert(extra.end(), 8, std::byte{0xa5});
          break;
        case 4:  // a group with a nested field
          wire::pb::putTag(extra, 90, wire::pb::kStartGroup);
          wire::pb::putTag(extra, 1, wire::pb::kVarint);
          wire::pb::putVarint(extra, 5);
          wire::pb::putTag(extra, 90, wire::pb::kEndGroup);
          break;
        default:  // field 1/2 with a varint: an unknown field to both decoders
          wire::pb::putTag(extra, static_cast<uint32_t>(1 + pick(3)), wire::pb::kVarint);
          wire::pb::putVarint(extra, 3);
          break;
      }
    }
    s.append(reinterpret_cast<const char*>(extra.data()), extra.size());  // NOLINT
  }

 private:
  std::mt19937_64 rng_;
};

TEST(CodecFast, RandomMessagesEqualProtobuf) {
  Gen g(0xC0107D);
  int accepted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    pb::SynchronizeRequest m;
    for (int i = g.pick(3); i > 0; --i) *m.add_pods() = g.pod();
    for (int i = g.pick(4); i > 0; --i) *m.add_containers() = g.container();
    if (g.coin()) m.set_more(true);
    std::string s = m.SerializeAsString();
    if (g.coin()) {
      g.oddities(s);
    }
    if (g.pick(4) == 0) {
      // Concatenation = merge: repeated singular fields, merged messages, appended lists.
      pb::SynchronizeRequest m2;
      *m2.add_pods() = g.pod();
      s += m2.SerializeAsString();
    }
    accepted += checkAll(toBytes(s)) ? 1 : 0;

    // Event shapes with concatenated sub-messages (a `container` field twice merges).
    pb::StateChangeEvent e;
    e.set_event(static_cast<pb::Event>(g.pick(16)));
    *e.mutable_pod() = g.pod();
    if (g.coin()) *e.mutable_container() = g.container();
    std::string es = e.SerializeAsString();
    if (g.coin()) {
      pb::StateChangeEvent e2;
      *e2.mutable_container() = g.container();
      *e2.mutable_pod() = g.pod();
      es += e2.SerializeAsString();
    }
    if (g.coin()) {
      g.oddities(es);
    }
    checkAll(toBytes(es));
  }
  EXPECT_GT(accepted, 350);  // the generator makes valid messages; the check above is not vacuous
}

TEST(CodecFast, CorruptedMessagesNeverDisagree) {
  google::protobuf::LogSilencer quiet;  // the reference logs every invalid UTF-8 string
  Gen g(42);
  std::mt19937_64 rng(7);
  int rejected = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    pb::CreateContainerRequest m;
    *m.mutable_pod() = g.pod();
    *m.mutable_container() = g.container();
    auto b = toBytes(m.SerializeAsString());
    if (b.empty()) {
      continue;
    }
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < flips; ++i) {
      b[rng() % b.size()] = static_cast<std::byte>(rng());
    }
    if (rng() % 4 == 0) {
      b.resize(rng() % b.size());  // truncation
    }
    rejected += checkAll(b) ? 0 : 1;
    // Never a crash either way; a rejection is an EPROTO value.
    auto f = fast::decodeContainerEvent(b, {});
    if (!f) {
      EXPECT_EQ(f.error().errnoValue(), EPROTO);
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(CodecFast, MalformedInputIsAnError) {
  auto bad = [](std::initializer_list<int> v) {
    Bytes b;
    for (int x : v) b.push_back(static_cast<std::byte>(x));
    return b;
  };
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x0a, 0x05, 0x0a}), {}).has_value());  // short
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x00, 0x01}), {}).has_value());  // field 0
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x0f}), {}).has_value());  // wire type 7
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x0c}), {}).has_value());  // stray end-group
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x0b, 0x08, 0x01}), {}).has_value());  // open group
  EXPECT_FALSE(fast::decodePodEvent(bad({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0x01})).has_value());  // 11-byte varint
  // A huge declared length never allocates: it is checked against what is there.
  EXPECT_FALSE(fast::decodeSynchronizeRequest(bad({0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}), {})
                   .has_value());
  EXPECT_TRUE(fast::decodeSynchronizeRequest({}, {}).has_value());  // empty = all defaults
}

// A fuzzer finding: protobuf reads a tag in at most 5 bytes, accumulating 32 bits, so the high
// bits of a 5th tag byte are dropped, not rejected. The fast decoder must agree (it used to call
// such a tag malformed). Here field 0x4cfcfa4 (wire type varint, high bits of byte 5 set) = 0x60.
TEST(CodecFast, FiveByteTagWrapsLikeProtobuf) {
  Bytes b;
  for (int x : {0xa0, 0x9f, 0xbf, 0xa6, 0x60, 0x60}) {
    b.push_back(static_cast<std::byte>(x));
  }
  auto ref = reference::decodeUpdateContainerRequest(b);
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  auto got = fast::decodeUpdateContainerRequest(b);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  // A tag that needs a 6th byte is malformed for both.
  Bytes six;
  for (int x : {0xa0, 0x9f, 0xbf, 0xa6, 0xe0, 0x01, 0x60}) {
    six.push_back(static_cast<std::byte>(x));
  }
  EXPECT_FALSE(reference::decodeUpdateContainerRequest(six).has_value());
  EXPECT_FALSE(fast::decodeUpdateContainerRequest(six).has_value());
}

// Seeds for nri/fuzz/corpus (first byte = decoder, see fuzz/nri_fuzz.cpp; the rest a bare NRI
// payload). Writes only when COLOD_WRITE_FUZZ_SEEDS names a directory; otherwise checks the seeds
// decode, so they stay valid as the generator changes.
TEST(CodecFast, FuzzSeeds) {
  std::vector<std::pair<std::string, std::string>> seeds;
  Gen g(99);
  {
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    testing::realisticNode(2, 2, pods, ctrs);
    pb::SynchronizeRequest m;
    for (auto& p : pods) *m.add_pods() = p;
    for (auto& c : ctrs) *m.add_containers() = c;
    std::string s = m.SerializeAsString();
    g.oddities(s);
    seeds.emplace_back("fast_sync_realistic", std::string(1, '\x81') + s);
  }
  {
    auto pod = testing::realisticPod(1);
    pb::CreateContainerRequest c;
    *c.mutable_pod() = pod;
    *c.mutable_container() = testing::realisticContainer(1, pod);
    seeds.emplace_back("fast_create_realistic", std::string(1, '\x03') + c.SerializeAsString());
  }
  {
    pb::StateChangeEvent e;
    e.set_event(pb::STOP_POD_SANDBOX);
    *e.mutable_pod() = g.pod();
    *e.mutable_container() = g.container();
    std::string s = e.SerializeAsString();
    pb::StateChangeEvent e2;
    *e2.mutable_container() = g.container();
    s += e2.SerializeAsString();  // merge
    g.oddities(s);
    seeds.emplace_back("fast_statechange_merge", std::string(1, '\x05') + s);
  }
  {
    pb::UpdateContainerRequest u;
    *u.mutable_pod() = g.pod();
    *u.mutable_container() = g.container();
    g.resources(*u.mutable_linux_resources());
    seeds.emplace_back("fast_update_random", std::string(1, '\x04') + u.SerializeAsString());
  }
  const char* dir = std::getenv("COLOD_WRITE_FUZZ_SEEDS");  // NOLINT(concurrency-mt-unsafe)
  for (const auto& [name, bytes] : seeds) {
    auto payload = toBytes(bytes.substr(1));
    EXPECT_TRUE(checkAll(payload) || bytes[0] != '\x81') << name;
    if (dir != nullptr) {
      std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << bytes;
    }
  }
}

}  // namespace
}  // namespace colod::nri::codec
