"""Rule families, one module each: catalogued calls (COB100-COB107), declared blocking
(COB111), interprocedural chains (COB110). The texts of every code live in the catalog."""
