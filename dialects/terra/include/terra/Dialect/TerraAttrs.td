#ifndef TERRA_ATTRS_TD
#define TERRA_ATTRS_TD

include "terra/Dialect/TerraDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Terra_Attr<string name, string attrMnemonic>
    : AttrDef<Terra_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Terra_DimAttr : Terra_Attr<"Dim", "dim"> {
  let summary = "a size argument entry that is one of the op's operand dims";
  let description = [{
    An entry of a size-list argument of a `terra.op` (`view`'s `size`,
    `expand`'s `size`, `slice_backward`'s `input_sizes`, ...) that the
    tracer recorded as "dim `dim` of tensor operand `operand`" rather than
    as the number it was in that iteration (spec 6.3.1: shapes are relaxed,
    not part of an op's identity). Two iterations whose batch or sequence
    length differ then record the same op, and the lowering reads the size
    with `tensor.dim` of that operand:

    ```mlir
    %v = terra.op "aten.view.default"(%x)
           args {size = [#terra.dim<0, 0>, #terra.dim<0, 1>, 12 : i64, 64 : i64]}
           : (tensor<?x?x768xf32>) -> tensor<?x?x12x64xf32>
    ```

    The tracer only writes one where the number equalled that dim, so the
    form is exact for every iteration it validates (the host computes the
    same form from its own shapes).
  }];
  let parameters = (ins "unsigned":$operand, "unsigned":$dim);
  let assemblyFormat = "`<` $operand `,` $dim `>`";
}

#endif // TERRA_ATTRS_TD
