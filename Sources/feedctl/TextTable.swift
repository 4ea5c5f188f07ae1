/// Rows printed in columns for people: each column as wide as its widest cell, two spaces
/// between, the last column left ragged.
struct TextTable {
    var rows: [[String]]

    init(header: [String]) {
        rows = [header]
    }

    mutating func append(_ row: [String]) {
        rows.append(row)
    }

    func print() {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            Swift.print(cells.joined(separator: "  "))
        }
    }
}
