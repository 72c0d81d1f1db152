// Reads one query a line and prints what the rendered _split_plan.j2 makes of it (tests/test_split_plan.py):
//   cut K TILE_K SPLITS SHORT                      -> depth full last rest count
//   most K TILE_K MIN_DEPTH                        -> most
//   tiles M N TILE_M TILE_N CLUSTER_M CLUSTER_N    -> tiles
//   auto K TILE_K TILES SM_COUNT MOST SHORT        -> splits
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>

#include "split_plan.h"

int main() {
  std::string op;
  while (std::cin >> op) {
    if (op == "cut") {
      int64_t k, tile_k, splits, short_last;
      std::cin >> k >> tile_k >> splits >> short_last;
      FactSplitCut const c = fact_split_cut(k, tile_k, splits, short_last != 0);
      std::cout << c.depth << ' ' << c.full << ' ' << c.last << ' ' << c.rest << ' ' << c.count() << '\n';
    } else if (op == "most") {
      int64_t k, tile_k, min_depth;
      std::cin >> k >> tile_k >> min_depth;
      std::cout << fact_most_splits(k, tile_k, min_depth) << '\n';
    } else if (op == "tiles") {
      int64_t m, n, tile_m, tile_n, cluster_m, cluster_n;
      std::cin >> m >> n >> tile_m >> tile_n >> cluster_m >> cluster_n;
      std::cout << fact_split_tiles(m, n, tile_m, tile_n, cluster_m, cluster_n) << '\n';
    } else if (op == "auto") {
      int64_t k, tile_k, tiles, sm_count, most, short_last;
      std::cin >> k >> tile_k >> tiles >> sm_count >> most >> short_last;
      std::cout << fact_auto_splits(k, tile_k, tiles, sm_count, most, short_last != 0) << '\n';
    } else {
      std::cerr << "unknown query " << op << '\n';
      return 2;
    }
  }
  return 0;
}
