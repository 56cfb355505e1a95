// docs/README.md is the index of docs/: every page of docs/ (and of docs/data/) is linked
// from it, and every page it links exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The relative .md targets of the index's links, "data/x.md" or "x.md".
std::set<std::string> linked(const std::string& index) {
  std::set<std::string> out;
  const std::regex link(R"(\]\(([A-Za-z0-9_./-]+\.md)\))");
  for (auto it = std::sregex_iterator(index.begin(), index.end(), link); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

TEST(DocsIndex, EveryPageOfDocsIsLinkedFromTheIndex) {
  const fs::path docs = fs::path(BITSIM_SOURCE_DIR) / "docs";
  const std::set<std::string> links = linked(read(docs / "README.md"));
  int pages = 0;
  for (const auto& e : fs::recursive_directory_iterator(docs)) {
    if (!e.is_regular_file() || e.path().extension() != ".md") continue;
    const std::string rel = fs::relative(e.path(), docs).generic_string();
    if (rel == "README.md" || rel.find("notebooks/") == 0) continue;
    ++pages;
    EXPECT_TRUE(links.count(rel)) << "docs/" << rel << " is not linked from docs/README.md";
  }
  EXPECT_GT(pages, 20);
}

TEST(DocsIndex, EveryPageTheIndexLinksExists) {
  const fs::path docs = fs::path(BITSIM_SOURCE_DIR) / "docs";
  for (const std::string& rel : linked(read(docs / "README.md")))
    if (rel.find("../") != 0) EXPECT_TRUE(fs::exists(docs / rel)) << "docs/README.md links " << rel << ", which is missing";
}

}  // namespace
