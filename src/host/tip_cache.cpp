#include "host/tip_cache.h"

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::host {

TipCache::TipCache(const MemoryMap& map, int layers, int heads) : map_(map), layers_(layers), heads_(heads) {
  if (!map.tip()) throw Error("TIP region tables: the memory map's kv.format is not tip");
  reset();
}

void TipCache::reset() {
  areas_.clear();
  const TipAreaLayout& L = map_.tip_layout();
  areas_.reserve(size_t(layers_) * size_t(heads_));
  for (int i = 0; i < layers_ * heads_; ++i) {
    Area a(map_.config().tip);
    a.slot.assign(size_t(L.regions), -1);
    for (int t = 0; t < 3; ++t) a.used.emplace_back(size_t(L.slots[t]), false);
    areas_.push_back(std::move(a));
  }
}

uint64_t TipCache::slot_addr(int layer, int head, model::TipTier t, int slot) const {
  return map_.k_area(layer, head) + map_.tip_layout().slot(t, slot);
}

// The lowest free slot of tier t's pool. The pools are sized for the most regions a tier
// holds at once (model::tip_storage), so a full pool is a broken invariant, not bad input.
int TipCache::take(Area& a, model::TipTier t, int layer, int head) {
  std::vector<bool>& used = a.used[size_t(t)];
  for (size_t s = 0; s < used.size(); ++s)
    if (!used[s]) {
      used[s] = true;
      return int(s);
    }
  throw Error(fmt::format("TIP: layer {} head {}: no free {} slot of {} (the pools of docs/tip.md "
                          "\"Storage accounting\" are too small)",
                          layer, head, model::tip_tier_name(t), used.size()));
}

std::vector<TipCache::Move> TipCache::place(int layer, int head, int pos) {
  Area& a = at(layer, head);
  std::vector<Move> moves;
  const int leaving = a.regions.leaving(pos);
  if (leaving < 0) return moves;
  for (const model::TipRegions::Change& c : a.regions.place(leaving)) {
    Move m;
    m.region = c.region;
    m.from = c.from;
    m.to = c.to;
    m.from_addr = slot_addr(layer, head, c.from, a.slot[size_t(c.region)]);
    moves.push_back(m);
  }
  // Free every old slot first (a swap hands one region's slot to the other), then take.
  for (const Move& m : moves) a.used[size_t(m.from)][size_t(a.slot[size_t(m.region)])] = false;
  for (Move& m : moves) {
    const int s = take(a, m.to, layer, head);
    a.slot[size_t(m.region)] = s;
    m.to_addr = slot_addr(layer, head, m.to, s);
  }
  return moves;
}

uint64_t TipCache::row(int layer, int head, int pos) {
  Area& a = at(layer, head);
  const int R = map_.tip_layout().region, r = pos / R;
  if (r >= int(a.slot.size()))
    throw Error(fmt::format("TIP: position {} is outside the KV area's {} regions", pos, a.slot.size()));
  if (a.slot[size_t(r)] < 0) a.slot[size_t(r)] = take(a, model::TipTier::Kvq8, layer, head);
  const model::TipTier t = a.regions.tier(r);
  return slot_addr(layer, head, t, a.slot[size_t(r)]) + uint64_t(pos % R) * map_.tip_layout().row_bytes[int(t)];
}

std::vector<model::TipTier> TipCache::tiers(int layer, int head, int T) const {
  const Area& a = at(layer, head);
  const int R = map_.tip_layout().region;
  std::vector<model::TipTier> out(size_t((T + R - 1) / R));
  for (size_t r = 0; r < out.size(); ++r) out[r] = a.regions.tier(int(r));
  return out;
}

std::vector<TipCache::Segment> TipCache::segments(int layer, int head, int T) const {
  const Area& a = at(layer, head);
  const TipAreaLayout& L = map_.tip_layout();
  std::vector<Segment> out;
  for (int r = 0; r * L.region < T; ++r) {
    const model::TipTier t = a.regions.tier(r);
    if (a.slot[size_t(r)] < 0) throw Error(fmt::format("TIP: region {} of layer {} head {} has no slot", r, layer, head));
    const int rows = std::min(L.region, T - r * L.region);
    out.push_back({slot_addr(layer, head, t, a.slot[size_t(r)]), uint32_t(uint64_t(rows) * L.row_bytes[int(t)])});
  }
  return out;
}

void TipCache::add_masses(int layer, int head, const std::vector<uint32_t>& masses) {
  at(layer, head).regions.add_masses(masses);
}

void TipCache::replay(int pos) {
  reset();
  for (int l = 0; l < layers_; ++l)
    for (int h = 0; h < heads_; ++h)
      for (int p = 0; p < pos; ++p) {
        (void)place(l, h, p);
        (void)row(l, h, p);
      }
}

}  // namespace bitsim::host
