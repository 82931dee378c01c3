module snowflaked.example/snowflake

go 1.19
