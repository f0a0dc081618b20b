module github.com/vigilhq/vigil

go 1.26.0

require github.com/mattn/go-sqlite3 v1.14.53
