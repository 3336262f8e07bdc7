// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice Test-only: a contract wallet that refuses payments while `refusing` is set (its receive reverts), as a
/// wallet that cannot be paid does (decisions.md, "Wallets that cannot be paid").
contract RefusingWallet {
    bool public refusing;

    constructor(bool refusing_) {
        refusing = refusing_;
    }

    function setRefusing(bool refusing_) external {
        refusing = refusing_;
    }

    receive() external payable {
        require(!refusing, "this wallet refuses payments");
    }
}
