module snowflaked.example/orders

go 1.19

require snowflaked.example/snowflake v0.0.0

// The package from a checkout (or a vendored copy) of snowflake: its module path cannot be
// fetched, so a service points it at the directory that holds bindings/go.
replace snowflaked.example/snowflake => ../
