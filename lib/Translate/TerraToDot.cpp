//===- TerraToDot.cpp - Render TraceGraphs as Graphviz DOT ----------------===//
//
// Layout of the output, per terra.trace_graph @G:
//
//   digraph "G" {
//     <graph attributes>
//     nID [label="ID: KIND\n...", shape=...];      one per terra.node
//     subgraph cluster_ID { label="ID: loop ..."; <body level> }
//     nA -> nB;                                    succ, in case order
//     nP -> nC [style=dashed, label="rR->inS"];    sources (data flow)
//   }
//
// Graphviz edges cannot end at a cluster, so an edge into a loop node goes
// to its body's start node clipped at the cluster (`lhead`), and an edge out
// of it leaves from the body's end node (`ltail`).
//
//===----------------------------------------------------------------------===//
#include "terra/Translate/TerraToDot.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace terra;

/// A DOT string literal.
static std::string quote(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

static void printIdList(raw_ostream &os, ArrayRef<int64_t> ids) {
  os << '[';
  llvm::interleaveComma(ids, os);
  os << ']';
}

namespace {

class DotPrinter {
public:
  DotPrinter(raw_ostream &os, const DotOptions &options)
      : os(os), options(options) {}

  void print(TraceGraphOp graph);

private:
  void printLevel(Block &level, unsigned indent);
  void printNode(NodeOp node, unsigned indent);
  void printSuccEdges(Block &level);
  void printDataFlowEdges(TraceGraphOp graph);

  raw_ostream &os;
  const DotOptions &options;
  /// Loop node id -> the ids of its body's start and end nodes.
  llvm::DenseMap<int64_t, std::pair<int64_t, int64_t>> loopEnds;
};

} // namespace

void DotPrinter::print(TraceGraphOp graph) {
  loopEnds.clear();
  graph.walk([&](LoopNodeOp loop) {
    for (auto node : loop.getBody().front().getOps<NodeOp>()) {
      if (node.getKind() == NodeKind::Start)
        loopEnds[loop.getId()].first = node.getId();
      else if (node.getKind() == NodeKind::End)
        loopEnds[loop.getId()].second = node.getId();
    }
  });

  os << "digraph " << quote(graph.getSymName()) << " {\n";
  std::string title;
  llvm::raw_string_ostream(title)
      << "@" << graph.getSymName() << " (" << graph.getNumTraces()
      << (graph.getNumTraces() == 1 ? " trace)" : " traces)");
  os << "  label=" << quote(title) << ";\n"
     << "  labelloc=t;\n"
     << "  compound=true;\n"
     << "  fontname=\"Helvetica\";\n"
     << "  node [fontname=\"Helvetica\"];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=10];\n";
  printLevel(graph.getBody().front(), 1);
  printSuccEdges(graph.getBody().front());
  if (options.dataFlow)
    printDataFlowEdges(graph);
  os << "}\n";
}

void DotPrinter::printLevel(Block &level, unsigned indent) {
  for (Operation &op : level) {
    if (auto node = dyn_cast<NodeOp>(op)) {
      printNode(node, indent);
      continue;
    }
    auto loop = cast<LoopNodeOp>(op);
    std::string label;
    llvm::raw_string_ostream labelOs(label);
    labelOs << loop.getId() << ": loop, trips ";
    printIdList(labelOs, loop.getTrips());
    os.indent(2 * indent) << "subgraph cluster_" << loop.getId() << " {\n";
    os.indent(2 * indent + 2) << "label=" << quote(label) << ";\n";
    os.indent(2 * indent + 2) << "style=rounded;\n";
    printLevel(loop.getBody().front(), indent + 1);
    os.indent(2 * indent) << "}\n";
  }
}

void DotPrinter::printNode(NodeOp node, unsigned indent) {
  std::string label;
  llvm::raw_string_ostream labelOs(label);
  NodeKind kind = node.getKind();
  labelOs << node.getId() << ": " << stringifyNodeKind(kind);
  if (std::optional<StringRef> name = node.getName())
    labelOs << '\n' << *name;
  if (!node.getResultTypes().empty()) {
    labelOs << "\n-> ";
    llvm::interleaveComma(node.getResultTypes(), labelOs, [&](Attribute type) {
      labelOs << cast<TypeAttr>(type).getValue();
    });
  }
  ArrayRef<int64_t> fetchIds = node.getFetchIds();
  bool fetched = llvm::any_of(fetchIds, [](int64_t id) { return id >= 0; });
  if (fetched) {
    labelOs << "\nfetch ";
    printIdList(labelOs, fetchIds);
  }

  StringRef shape = "box";
  if (kind == NodeKind::Start || kind == NodeKind::End)
    shape = "oval";
  else if (kind == NodeKind::Feed)
    shape = "invhouse";
  else if (kind == NodeKind::State)
    shape = "cylinder";
  os.indent(2 * indent) << 'n' << node.getId() << " [label=" << quote(label)
                        << ", shape=" << shape;
  if (fetched)
    os << ", peripheries=2";
  if (std::optional<DictionaryAttr> args = node.getArgs()) {
    std::string tooltip;
    llvm::raw_string_ostream(tooltip) << *args;
    os << ", tooltip=" << quote(tooltip);
  }
  os << "];\n";
}

void DotPrinter::printSuccEdges(Block &level) {
  for (Operation &op : level) {
    int64_t id;
    ArrayRef<int64_t> succ;
    if (auto node = dyn_cast<NodeOp>(op)) {
      id = node.getId();
      succ = node.getSucc();
    } else {
      auto loop = cast<LoopNodeOp>(op);
      id = loop.getId();
      succ = loop.getSucc();
    }
    auto tail = loopEnds.find(id);
    for (auto [index, target] : llvm::enumerate(succ)) {
      auto head = loopEnds.find(target);
      os << "  n" << (tail != loopEnds.end() ? tail->second.second : id)
         << " -> n" << (head != loopEnds.end() ? head->second.first : target);
      SmallVector<std::string> attrs;
      if (succ.size() > 1)
        attrs.push_back("label=" + quote("case " + std::to_string(index)));
      if (tail != loopEnds.end())
        attrs.push_back("ltail=cluster_" + std::to_string(id));
      if (head != loopEnds.end())
        attrs.push_back("lhead=cluster_" + std::to_string(target));
      if (!attrs.empty()) {
        os << " [";
        llvm::interleaveComma(attrs, os);
        os << ']';
      }
      os << ";\n";
    }
    if (auto loop = dyn_cast<LoopNodeOp>(op))
      printSuccEdges(loop.getBody().front());
  }
}

void DotPrinter::printDataFlowEdges(TraceGraphOp graph) {
  graph.walk([&](NodeOp node) {
    for (auto [slot, sources] : llvm::enumerate(node.getSources())) {
      ArrayRef<int64_t> flat = cast<DenseI64ArrayAttr>(sources).asArrayRef();
      for (size_t i = 0; i + 2 < flat.size(); i += 3) {
        std::string label =
            "r" + std::to_string(flat[i + 1]) + "->in" + std::to_string(slot);
        if (flat[i + 2])
          label += " (age " + std::to_string(flat[i + 2]) + ")";
        os << "  n" << flat[i] << " -> n" << node.getId()
           << " [style=dashed, color=blue, fontcolor=blue, constraint=false, "
              "label="
           << quote(label) << "];\n";
      }
    }
  });
}

void terra::printTraceGraphAsDot(TraceGraphOp graph, raw_ostream &os,
                                 const DotOptions &options) {
  DotPrinter(os, options).print(graph);
}

LogicalResult terra::exportTraceGraphsToDot(Operation *op, raw_ostream &os,
                                            const DotOptions &options) {
  bool found = false;
  op->walk([&](TraceGraphOp graph) {
    if (found)
      os << '\n';
    found = true;
    printTraceGraphAsDot(graph, os, options);
  });
  if (!found)
    return op->emitError("found no terra.trace_graph to render; build one "
                         "with 'terra-opt -terra-merge-traces'");
  return success();
}
