#pragma once
// TipCache: the host's side of TIP, the KV cache's precision tiers (docs/tip.md). Per (layer,
// head) the region table (model::TipRegions: tiers, importance and query counts, fed by the
// unit's region masses) and the assignment of regions to the slots of their tier's pool in
// the KV area (host/memory_map.h, TipAreaLayout). The CPU runs it at the token boundary: it
// places the region leaving the recent window, moves demoted regions to slots of their new
// tier (the token loop re-encodes their rows), and writes each new row at KVQ8.
#include <cstdint>
#include <vector>

#include "host/memory_map.h"
#include "model/kv_tip.h"

namespace bitsim::host {

class TipCache {
 public:
  // `layer_heads` tables over the map's TIP areas (the map's kv.format must be tip).
  TipCache(const MemoryMap& map, int layers, int heads);

  // A region that changes tier: its rows move from one slot to another (the old slot is free
  // once every move of the placement has been read).
  struct Move {
    int region = 0;
    model::TipTier from{}, to{};
    uint64_t from_addr = 0, to_addr = 0;  // the region's first row, before and after
  };
  // Before the row of `pos` of (layer, head) is written: places the region leaving the recent
  // window (docs/tip.md "Regions and the rule") and assigns the changed regions their new
  // slots. Read every move's rows before writing any: a freed slot can be taken by another.
  std::vector<Move> place(int layer, int head, int pos);
  // Where the row of `pos` lives (its region's slot, a KVQ8 slot given at the region's first
  // row). Call in position order after place(pos).
  uint64_t row(int layer, int head, int pos);
  // The tiers of the regions holding positions 0..T-1, and the stream's segments after the
  // bank: per region its slot's first row and its rows' bytes at its tier.
  std::vector<model::TipTier> tiers(int layer, int head, int T) const;
  struct Segment {
    uint64_t addr = 0;
    uint32_t bytes = 0;
  };
  std::vector<Segment> segments(int layer, int head, int T) const;
  // A query's masses a_r (UQ0.16) into the region table's counters.
  void add_masses(int layer, int head, const std::vector<uint32_t>& masses);
  // Timing-only runs at a context T (TokenLoop::set_position): the tables and slots as a run
  // from position 0 leaves them with no attention mass (every tie to the older region).
  void replay(int pos);
  const model::TipRegions& regions(int layer, int head) const { return at(layer, head).regions; }

 private:
  struct Area {
    model::TipRegions regions;
    std::vector<int> slot;              // per region its slot in its tier's pool; -1 none yet
    std::vector<std::vector<bool>> used;  // per pool, per slot
    explicit Area(const model::TipSettings& s) : regions(s) {}
  };
  Area& at(int layer, int head) { return areas_[size_t(layer) * size_t(heads_) + size_t(head)]; }
  const Area& at(int layer, int head) const { return areas_[size_t(layer) * size_t(heads_) + size_t(head)]; }
  int take(Area& a, model::TipTier t, int layer, int head);
  uint64_t slot_addr(int layer, int head, model::TipTier t, int slot) const;
  void reset();

  const MemoryMap& map_;
  int layers_ = 0, heads_ = 0;
  std::vector<Area> areas_;
};

}  // namespace bitsim::host
