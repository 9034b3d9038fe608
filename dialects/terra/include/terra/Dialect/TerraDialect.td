#ifndef TERRA_DIALECT_TD
#define TERRA_DIALECT_TD

include "mlir/IR/OpBase.td"

def Terra_Dialect : Dialect {
  let name = "terra";
  let summary = "Imperative-symbolic co-execution of deep-learning programs";
  let description = [{
    The `terra` dialect models the pipeline of Terra (NeurIPS 2021) for
    PyTorch programs:

    * `terra.trace` holds the DL ops one iteration of the user's step
      function executed, in order, with loop markers;
    * `terra.trace_graph` is the merged TraceGraph of several traces (an
      execution-order DAG with loop nodes and path-aware provenance);
    * `terra.graph` is the single symbolic graph generated from it, in plain
      `scf`/`tensor`/`arith` plus the communication ops `terra.feed`,
      `terra.fetch`, `terra.case_select` and `terra.loop_cond`.

    The site of a DL op (the equality key of spec section 2.2: the user's
    call stack with bytecode offsets) is the op's MLIR location: a
    `callsite` chain of `"code-object":line:offset` frames, innermost first,
    where the column holds the bytecode offset `f_lasti`.
  }];
  let cppNamespace = "::terra";
  let useDefaultAttributePrinterParser = 1;
}

class Terra_Op<string mnemonic, list<Trait> traits = []>
    : Op<Terra_Dialect, mnemonic, traits>;

#endif // TERRA_DIALECT_TD
